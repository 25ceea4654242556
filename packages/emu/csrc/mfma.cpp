// moonmath-emu MFMA arithmetic for CDNA3 (gfx942) and CDNA4 (gfx950).
//
// ## Layouts (where A[i][k], B[k][j], C/D[i][j] live)
// Sources: AMD's Matrix Instruction Calculator (ROCm/amd_matrix_instruction_calculator, CDNA3
// tables: "--detail-instruction" formulas), AMD's CDNA3 ISA guide chapter 7, AMD's ROCm blog
// "Matrix Core Programming on AMD CDNA3 and CDNA4 architecture" (figures for 32x32x16 fp8 and the
// scaled 32x32x64 f8f6f4 with fp8 and fp4 inputs), ARCHITECTURE.md section 5 (gfx950 16x16x32 bf16).
//
// With G = 64 / M lane groups ("M" = rows of one block; M == N for every shape here):
//  * single-block forms (16x16xK, 32x32xK): each lane holds E = regs*32/width consecutive elements
//    of one row i of A (column j of B). The K axis is cut into chunks of C elements:
//      k = C*G*p + C*g + e   (p = pass, g = lane group, e = element within the chunk)
//      A[i][k] -> lane M*g + i, element p*C + e of that lane (packed little-endian from register 0).
//    C == E (one pass) for everything except the f8f6f4 forms with fp8/bf8 operands, where C = 16
//    (two passes: registers 0-3 then 4-7; ROCm blog figure for 32x32x64 fp8). fp4 is one pass of
//    C = 32 (blog figure). fp6/bf6 is taken as one pass of C = 32 like fp4 (UNVERIFIED: no figure;
//    it matches the fp4/fp6 cycle count being half the fp8 one).
//    D[i][j] -> lane N*((i/4) % G) + j, register 4*((i/4) / G) + i%4.
//  * multi-block forms (4x4x4_16b, 16x16x4_4b, 32x32x4_2b, ..._f32 _xb): block b's A[i][k] in lane
//    M*b + i, element k; D as above with a register offset (M*N/64)*b, except 4x4 (16 blocks):
//    D[i][j] of block b in register i, lane 4*b + j.
//  * f64: 16x16x4: A[i][k] lane 16*k + i (one f64 = 2 regs); D[i][j] lane 16*(i%4) + j, register
//    pair 2*(i/4). 4x4x4_4b: A[i][k] of block b in lane 4*b + 16*k + i; D lane 16*(i%4) + 4*b + j.
//  * scaled f8f6f4 (gfx950): one E8M0 scale per 32 consecutive k of a row of A (column of B).
//    The scale of A row i, k-block kb sits in lane M*kb + i of the scale VGPR (byte = op_sel);
//    for B column j in lane N*kb + j (ROCm blog figure: Ax[i][kb] in lane 32*kb + i for 32x32x64;
//    16x16x128 by the same rule, UNVERIFIED).
//
// Modifiers (calculator README / CDNA3 ISA): CBSZ/ABID (multi-block forms): block b reads A's block
// (b & ~(2^CBSZ - 1)) | ABID. BLGP (multi-block and f32 forms): B's lanes are read through a lane
// pattern (0 identity; 1 lanes 32-63 read 0-31; 2 lanes 0-31 read 32-63; 3 rotate: lane L reads
// L+16 mod 64; 4..7: every 16-lane group reads group BLGP-4). f64 forms: the BLGP field is NEG.
// f8f6f4 forms: CBSZ / BLGP are A / B formats (0 fp8, 1 bf8, 2 fp6, 3 bf6, 4 fp4).
//
// ## Numerics (our model; the hardware's internal order is not documented bit-exactly)
//  * Inputs are decoded exactly (f16/bf16/fp8/fp6/fp4 values are all exact in double); input
//    denormals are honoured (CDNA3/CDNA4 MFMA: MI200's flush-to-zero of f16/bf16 MFMA denormals is
//    documented for MI200 only), NaN/Inf propagate.
//  * Float forms: every product a*b is exact in double (<= 24+24 significant bits); the products of
//    one output element are summed in double in ascending k, then C is added, then the sum is
//    rounded once to f32 (RNE, f32 denormal results kept). Scaled forms: each 32-wide k-block's
//    partial sum is multiplied by 2^(sa-127) * 2^(sb-127) (exact), block sums are added in ascending
//    k-block order, then C, then one rounding. A scale of 0xFF (NaN) makes the element NaN.
//  * i8 forms: exact integer dot product, C added, wrapped to 32 bits.
//  * f64 forms: fused multiply-add chain in ascending k starting from C (one rounding per step).
#include "mfma.hpp"

#include <cmath>
#include <cstring>

#include "numerics.hpp"

namespace mmemu {
namespace {

using num::Fmt;

// ------------------------------------------------------------------------------------------------
// instruction table
struct Row {
  const char* mn;
  int a_regs, b_regs, cd_regs;
  bool scaled;
  int M, N, K, blocks;
  MfmaType at, bt, ct;
  int passes;
  bool cbsz_abid, blgp_lanes, blgp_neg;
  int arch;  // 0 both, 1 gfx942 only, 2 gfx950 only
};

using T = MfmaType;
// passes = cycles / 4 (cycles from the calculator for CDNA3; gfx950 shapes from the ROCm blog table)
const Row kRows[] = {
    // f32
    {"v_mfma_f32_32x32x1_2b_f32", 1, 1, 32, false, 32, 32, 1, 2, T::F32, T::F32, T::F32, 16, true, true, false, 0},
    {"v_mfma_f32_16x16x1_4b_f32", 1, 1, 16, false, 16, 16, 1, 4, T::F32, T::F32, T::F32, 8, true, true, false, 0},
    {"v_mfma_f32_4x4x1_16b_f32", 1, 1, 4, false, 4, 4, 1, 16, T::F32, T::F32, T::F32, 2, true, true, false, 0},
    {"v_mfma_f32_32x32x2_f32", 1, 1, 16, false, 32, 32, 2, 1, T::F32, T::F32, T::F32, 16, false, true, false, 0},
    {"v_mfma_f32_16x16x4_f32", 1, 1, 4, false, 16, 16, 4, 1, T::F32, T::F32, T::F32, 8, false, true, false, 0},
    // f16
    {"v_mfma_f32_32x32x4_2b_f16", 2, 2, 32, false, 32, 32, 4, 2, T::F16, T::F16, T::F32, 16, true, true, false, 0},
    {"v_mfma_f32_16x16x4_4b_f16", 2, 2, 16, false, 16, 16, 4, 4, T::F16, T::F16, T::F32, 8, true, true, false, 0},
    {"v_mfma_f32_4x4x4_16b_f16", 2, 2, 4, false, 4, 4, 4, 16, T::F16, T::F16, T::F32, 2, true, true, false, 0},
    {"v_mfma_f32_32x32x8_f16", 2, 2, 16, false, 32, 32, 8, 1, T::F16, T::F16, T::F32, 8, false, false, false, 0},
    {"v_mfma_f32_16x16x16_f16", 2, 2, 4, false, 16, 16, 16, 1, T::F16, T::F16, T::F32, 4, false, false, false, 0},
    // bf16 (gfx90a+ "_1k" builtins; printed without the suffix)
    {"v_mfma_f32_32x32x4_2b_bf16", 2, 2, 32, false, 32, 32, 4, 2, T::BF16, T::BF16, T::F32, 16, true, true, false, 0},
    {"v_mfma_f32_16x16x4_4b_bf16", 2, 2, 16, false, 16, 16, 4, 4, T::BF16, T::BF16, T::F32, 8, true, true, false, 0},
    {"v_mfma_f32_4x4x4_16b_bf16", 2, 2, 4, false, 4, 4, 4, 16, T::BF16, T::BF16, T::F32, 2, true, true, false, 0},
    {"v_mfma_f32_32x32x8_bf16", 2, 2, 16, false, 32, 32, 8, 1, T::BF16, T::BF16, T::F32, 8, false, false, false, 0},
    {"v_mfma_f32_16x16x16_bf16", 2, 2, 4, false, 16, 16, 16, 1, T::BF16, T::BF16, T::F32, 4, false, false, false, 0},
    // i8
    {"v_mfma_i32_32x32x4_2b_i8", 1, 1, 32, false, 32, 32, 4, 2, T::I8, T::I8, T::I32, 16, true, true, false, 0},
    {"v_mfma_i32_16x16x4_4b_i8", 1, 1, 16, false, 16, 16, 4, 4, T::I8, T::I8, T::I32, 8, true, true, false, 0},
    {"v_mfma_i32_4x4x4_16b_i8", 1, 1, 4, false, 4, 4, 4, 16, T::I8, T::I8, T::I32, 2, true, true, false, 0},
    {"v_mfma_i32_32x32x16_i8", 2, 2, 16, false, 32, 32, 16, 1, T::I8, T::I8, T::I32, 8, false, false, false, 0},
    {"v_mfma_i32_16x16x32_i8", 2, 2, 4, false, 16, 16, 32, 1, T::I8, T::I8, T::I32, 4, false, false, false, 0},
    // f64
    {"v_mfma_f64_16x16x4_f64", 2, 2, 8, false, 16, 16, 4, 1, T::F64, T::F64, T::F64, 8, false, false, true, 0},
    {"v_mfma_f64_4x4x4_4b_f64", 2, 2, 2, false, 4, 4, 4, 4, T::F64, T::F64, T::F64, 4, false, false, true, 0},
    // fp8 / bf8 (gfx942: FNUZ formats, gfx950: OCP formats)
    {"v_mfma_f32_16x16x32_fp8_fp8", 2, 2, 4, false, 16, 16, 32, 1, T::FP8, T::FP8, T::F32, 4, false, false, false, 0},
    {"v_mfma_f32_16x16x32_fp8_bf8", 2, 2, 4, false, 16, 16, 32, 1, T::FP8, T::BF8, T::F32, 4, false, false, false, 0},
    {"v_mfma_f32_16x16x32_bf8_fp8", 2, 2, 4, false, 16, 16, 32, 1, T::BF8, T::FP8, T::F32, 4, false, false, false, 0},
    {"v_mfma_f32_16x16x32_bf8_bf8", 2, 2, 4, false, 16, 16, 32, 1, T::BF8, T::BF8, T::F32, 4, false, false, false, 0},
    {"v_mfma_f32_32x32x16_fp8_fp8", 2, 2, 16, false, 32, 32, 16, 1, T::FP8, T::FP8, T::F32, 8, false, false, false, 0},
    {"v_mfma_f32_32x32x16_fp8_bf8", 2, 2, 16, false, 32, 32, 16, 1, T::FP8, T::BF8, T::F32, 8, false, false, false, 0},
    {"v_mfma_f32_32x32x16_bf8_fp8", 2, 2, 16, false, 32, 32, 16, 1, T::BF8, T::FP8, T::F32, 8, false, false, false, 0},
    {"v_mfma_f32_32x32x16_bf8_bf8", 2, 2, 16, false, 32, 32, 16, 1, T::BF8, T::BF8, T::F32, 8, false, false, false, 0},
    // gfx950 (CDNA4) shapes
    {"v_mfma_f32_16x16x32_bf16", 4, 4, 4, false, 16, 16, 32, 1, T::BF16, T::BF16, T::F32, 4, false, false, false, 2},
    {"v_mfma_f32_32x32x16_bf16", 4, 4, 16, false, 32, 32, 16, 1, T::BF16, T::BF16, T::F32, 8, false, false, false, 2},
    {"v_mfma_f32_16x16x32_f16", 4, 4, 4, false, 16, 16, 32, 1, T::F16, T::F16, T::F32, 4, false, false, false, 2},
    {"v_mfma_f32_32x32x16_f16", 4, 4, 16, false, 32, 32, 16, 1, T::F16, T::F16, T::F32, 8, false, false, false, 2},
    {"v_mfma_i32_16x16x64_i8", 4, 4, 4, false, 16, 16, 64, 1, T::I8, T::I8, T::I32, 4, false, false, false, 2},
    {"v_mfma_i32_32x32x32_i8", 4, 4, 16, false, 32, 32, 32, 1, T::I8, T::I8, T::I32, 8, false, false, false, 2},
    {"v_mfma_f32_16x16x128_f8f6f4", 8, 8, 4, false, 16, 16, 128, 1, T::F8F6F4, T::F8F6F4, T::F32, 8, false, false, false, 2},
    {"v_mfma_f32_32x32x64_f8f6f4", 8, 8, 16, false, 32, 32, 64, 1, T::F8F6F4, T::F8F6F4, T::F32, 16, false, false, false, 2},
    {"v_mfma_scale_f32_16x16x128_f8f6f4", 8, 8, 4, true, 16, 16, 128, 1, T::F8F6F4, T::F8F6F4, T::F32, 8, false, false, false, 2},
    {"v_mfma_scale_f32_32x32x64_f8f6f4", 8, 8, 16, true, 32, 32, 64, 1, T::F8F6F4, T::F8F6F4, T::F32, 16, false, false, false, 2},
};
constexpr int kNumRows = sizeof(kRows) / sizeof(kRows[0]);

struct Tables {
  MfmaInfo info[2][kNumRows];
  int count[2] = {0, 0};
  Tables() {
    for (int arch = 0; arch < 2; ++arch) {
      for (int r = 0; r < kNumRows; ++r) {
        const Row& w = kRows[r];
        if (w.arch == 1 && arch == 1) continue;
        if (w.arch == 2 && arch == 0) continue;
        MfmaInfo& m = info[arch][count[arch]++];
        m.mnemonic = w.mn;
        m.a_regs = w.a_regs; m.b_regs = w.b_regs; m.cd_regs = w.cd_regs;
        m.is_scaled = w.scaled;
        m.M = w.M; m.N = w.N; m.K = w.K; m.blocks = w.blocks;
        m.a_type = w.at; m.b_type = w.bt; m.cd_type = w.ct;
        m.passes = w.passes;
        m.cbsz_abid = w.cbsz_abid; m.blgp_lanes = w.blgp_lanes; m.blgp_is_neg = w.blgp_neg;
        m.gfx950 = arch == 1;
        m.index = r;
      }
    }
  }
};
const Tables& tables() { static const Tables t; return t; }

// ------------------------------------------------------------------------------------------------
// element formats
enum class Elem : uint8_t { F32, F64, F16, BF16, I8, N8 /* narrow float via Fmt */ };
struct ElemFmt { Elem e; Fmt f; int width; };

ElemFmt f8f6f4_fmt(int sel) {
  switch (sel) {
    case 1: return {Elem::N8, Fmt::E5M2, 8};
    case 2: return {Elem::N8, Fmt::E2M3, 6};
    case 3: return {Elem::N8, Fmt::E3M2, 6};
    case 4: return {Elem::N8, Fmt::E2M1, 4};
    default: return {Elem::N8, Fmt::E4M3FN, 8};  // 0 (and the reserved 5..7, UNVERIFIED)
  }
}

ElemFmt elem_fmt(MfmaType t, bool gfx950, int sel) {
  switch (t) {
    case T::F32: return {Elem::F32, Fmt::E4M3FN, 32};
    case T::F64: return {Elem::F64, Fmt::E4M3FN, 64};
    case T::F16: return {Elem::F16, Fmt::E4M3FN, 16};
    case T::BF16: return {Elem::BF16, Fmt::E4M3FN, 16};
    case T::I8: return {Elem::I8, Fmt::E4M3FN, 8};
    case T::FP8: return {Elem::N8, num::fp8_fmt(gfx950), 8};
    case T::BF8: return {Elem::N8, num::bf8_fmt(gfx950), 8};
    case T::F8F6F4: return f8f6f4_fmt(sel);
    default: return {Elem::F32, Fmt::E4M3FN, 32};
  }
}

// 256-entry decode tables for the narrow formats (exact values as double)
struct NarrowLut {
  double v[7][256];
  NarrowLut() {
    for (int f = 0; f < 7; ++f)
      for (int c = 0; c < 256; ++c) v[f][c] = static_cast<double>(num::decode(static_cast<Fmt>(f), static_cast<uint32_t>(c)));
  }
};
const NarrowLut& narrow_lut() { static const NarrowLut l; return l; }

// chunk size C (see header comment)
int chunk_of(const MfmaInfo& info, const ElemFmt& ef, int elems_per_lane) {
  if (info.a_type == T::F8F6F4) return ef.width == 8 ? 16 : 32;
  return elems_per_lane;
}

// elements per lane of A (or B) for one block
int elems_per_lane(const MfmaInfo& info, int regs, const ElemFmt& ef) {
  if (info.a_type == T::F8F6F4) return 32;
  return regs * 32 / ef.width;
}

int regs_for_sel(int sel) {
  ElemFmt ef = f8f6f4_fmt(sel);
  return ef.width * 32 / 32;  // 32 elements * width bits / 32 bits per register
}

// location of operand element (block, row-or-col index x, k) for A (x = i) or B (x = j)
// -> lane, element index within the lane
void locate_ab(const MfmaInfo& info, const ElemFmt& ef, int regs, int block, int x, int k, int* lane, int* elem) {
  const int M = info.M;  // == N for all shapes
  if (info.a_type == T::F64) {
    if (info.blocks == 1) { *lane = 16 * k + x; *elem = 0; }
    else { *lane = 4 * block + 16 * k + x; *elem = 0; }
    return;
  }
  if (info.blocks > 1) { *lane = M * block + x; *elem = k; return; }
  const int E = elems_per_lane(info, regs, ef);
  const int C = chunk_of(info, ef, E);
  const int G = 64 / M;
  const int p = k / (C * G);
  const int r = k % (C * G);
  const int g = r / C;
  *lane = M * g + x;
  *elem = p * C + r % C;
}

// location of D element -> register, lane
void locate_d(const MfmaInfo& info, int block, int i, int j, int* reg, int* lane) {
  const int M = info.M, N = info.N;
  if (info.cd_type == T::F64) {
    if (info.blocks == 1) { *lane = 16 * (i % 4) + j; *reg = 2 * (i / 4); }
    else { *lane = 16 * (i % 4) + 4 * block + j; *reg = 0; }
    return;
  }
  if (M == 4) { *reg = i; *lane = 4 * block + j; return; }
  const int G = 64 / N;
  const int rg = i / 4;
  *lane = N * (rg % G) + j;
  *reg = 4 * (rg / G) + i % 4 + (M * N / 64) * block;
}

inline uint32_t extract_bits(const uint32_t* regs, int lane, int bitoff, int width) {
  const int r = bitoff >> 5, b = bitoff & 31;
  uint64_t w = regs[r * 64 + lane];
  if (b + width > 32) w |= static_cast<uint64_t>(regs[(r + 1) * 64 + lane]) << 32;
  return static_cast<uint32_t>((w >> b) & ((width == 32) ? 0xffffffffull : ((1ull << width) - 1ull)));
}

inline double decode_elem(const ElemFmt& ef, const uint32_t* regs, int lane, int elem) {
  switch (ef.e) {
    case Elem::F32: return static_cast<double>(num::f32_from_bits(regs[elem * 64 + lane]));
    case Elem::F64: {
      uint64_t lo = regs[(2 * elem) * 64 + lane], hi = regs[(2 * elem + 1) * 64 + lane];
      return num::f64_from_bits(lo | (hi << 32));
    }
    case Elem::F16: return static_cast<double>(num::f16_to_f32(static_cast<uint16_t>(extract_bits(regs, lane, elem * 16, 16))));
    case Elem::BF16: return static_cast<double>(num::bf16_to_f32(static_cast<uint16_t>(extract_bits(regs, lane, elem * 16, 16))));
    case Elem::I8: return static_cast<double>(static_cast<int8_t>(extract_bits(regs, lane, elem * 8, 8)));
    case Elem::N8: return narrow_lut().v[static_cast<int>(ef.f)][extract_bits(regs, lane, elem * ef.width, ef.width)];
  }
  return 0.0;
}

inline int blgp_src_lane(int blgp, int lane) {
  switch (blgp & 7) {
    case 1: return lane & 31;
    case 2: return 32 + (lane & 31);
    case 3: return (lane + 16) & 63;
    case 4: return lane & 15;
    case 5: return 16 + (lane & 15);
    case 6: return 32 + (lane & 15);
    case 7: return 48 + (lane & 15);
    default: return lane;
  }
}

}  // namespace

// ------------------------------------------------------------------------------------------------
const MfmaInfo* mfma_lookup(const char* mnemonic, bool gfx950) {
  if (!mnemonic) return nullptr;
  const Tables& t = tables();
  const int a = gfx950 ? 1 : 0;
  for (int r = 0; r < t.count[a]; ++r)
    if (std::strcmp(t.info[a][r].mnemonic, mnemonic) == 0) return &t.info[a][r];
  return nullptr;
}

std::vector<std::string> mfma_mnemonics(bool gfx950) {
  const Tables& t = tables();
  const int a = gfx950 ? 1 : 0;
  std::vector<std::string> out;
  for (int r = 0; r < t.count[a]; ++r) out.emplace_back(t.info[a][r].mnemonic);
  return out;
}

int mfma_a_regs(const MfmaInfo& info, int cbsz) {
  return info.a_type == T::F8F6F4 ? regs_for_sel(cbsz) : info.a_regs;
}
int mfma_b_regs(const MfmaInfo& info, int blgp) {
  return info.b_type == T::F8F6F4 ? regs_for_sel(blgp) : info.b_regs;
}

static bool locate_operand(const MfmaInfo& info, bool is_a, int sel, int block, int x, int k,
                           int* reg, int* lane, int* bit, int* width) {
  if (block < 0 || block >= info.blocks || x < 0 || x >= (is_a ? info.M : info.N) || k < 0 || k >= info.K) return false;
  const MfmaType t = is_a ? info.a_type : info.b_type;
  const ElemFmt ef = elem_fmt(t, info.gfx950, sel);
  const int regs = t == T::F8F6F4 ? regs_for_sel(sel) : (is_a ? info.a_regs : info.b_regs);
  int l, e;
  locate_ab(info, ef, regs, block, x, k, &l, &e);
  const int off = e * ef.width;
  *reg = off / 32; *lane = l; *bit = off % 32; *width = ef.width;
  return true;
}

bool mfma_locate_a(const MfmaInfo& info, int cbsz, int block, int i, int k, int* reg, int* lane, int* bit, int* width) {
  return locate_operand(info, true, cbsz, block, i, k, reg, lane, bit, width);
}
bool mfma_locate_b(const MfmaInfo& info, int blgp, int block, int k, int j, int* reg, int* lane, int* bit, int* width) {
  return locate_operand(info, false, blgp, block, j, k, reg, lane, bit, width);
}
bool mfma_locate_d(const MfmaInfo& info, int block, int i, int j, int* reg, int* lane) {
  if (block < 0 || block >= info.blocks || i < 0 || i >= info.M || j < 0 || j >= info.N) return false;
  locate_d(info, block, i, j, reg, lane);
  return true;
}

void mfma_execute(const MfmaInfo& info, const MfmaOperands& ops) {
  const int M = info.M, N = info.N, K = info.K, NB = info.blocks;
  const bool f8f6f4 = info.a_type == T::F8F6F4;
  const int a_sel = f8f6f4 ? ops.cbsz : 0;
  const int b_sel = f8f6f4 ? ops.blgp : 0;
  const ElemFmt efa = elem_fmt(info.a_type, info.gfx950, a_sel);
  const ElemFmt efb = elem_fmt(info.b_type, info.gfx950, b_sel);
  const int a_regs = mfma_a_regs(info, a_sel);
  const int b_regs = mfma_b_regs(info, b_sel);
  int neg = 0;
  if (info.blgp_is_neg) neg = (ops.neg | ops.blgp) & 7;

  // Decode A[b][i][k] and B[b][k][j] into doubles (exact).
  const int sizeA = NB * M * K, sizeB = NB * K * N;
  double abuf[4096], bbuf[4096];  // largest: 32x32x64 (2048), 16x16x128 (2048), 32x32x4_2b (256)
  for (int b = 0; b < NB; ++b) {
    int asrc = b;
    if (info.cbsz_abid && ops.cbsz > 0) asrc = (b & ~((1 << ops.cbsz) - 1)) | (ops.abid & ((1 << ops.cbsz) - 1));
    for (int i = 0; i < M; ++i)
      for (int k = 0; k < K; ++k) {
        int lane, e;
        locate_ab(info, efa, a_regs, asrc, i, k, &lane, &e);
        double v = decode_elem(efa, ops.a, lane, e);
        if (neg & 1) v = -v;
        abuf[(b * M + i) * K + k] = v;
      }
    for (int k = 0; k < K; ++k)
      for (int j = 0; j < N; ++j) {
        int lane, e;
        locate_ab(info, efb, b_regs, b, j, k, &lane, &e);
        if (info.blgp_lanes) lane = blgp_src_lane(ops.blgp, lane);
        double v = decode_elem(efb, ops.b, lane, e);
        if (neg & 2) v = -v;
        bbuf[(b * K + k) * N + j] = v;
      }
  }
  (void)sizeA; (void)sizeB;

  // Scales (scaled forms): one per 32 k per row of A / column of B.
  const int KB = info.is_scaled ? K / 32 : 1;
  double sa[32 * 4], sb[32 * 4];
  if (info.is_scaled) {
    const int sha = 8 * (ops.scale_a_opsel & 3), shb = 8 * (ops.scale_b_opsel & 3);
    for (int kb = 0; kb < KB; ++kb) {
      for (int i = 0; i < M; ++i) {
        uint8_t e = ops.scale_a ? static_cast<uint8_t>(ops.scale_a[M * kb + i] >> sha) : 127;
        sa[i * KB + kb] = num::e8m0_to_f64(e);
      }
      for (int j = 0; j < N; ++j) {
        uint8_t e = ops.scale_b ? static_cast<uint8_t>(ops.scale_b[N * kb + j] >> shb) : 127;
        sb[j * KB + kb] = num::e8m0_to_f64(e);
      }
    }
  }

  // Compute into a temporary (c may alias d).
  uint32_t out[64 * 32];
  for (int b = 0; b < NB; ++b) {
    for (int i = 0; i < M; ++i) {
      const double* arow = &abuf[(b * M + i) * K];
      for (int j = 0; j < N; ++j) {
        int reg, lane;
        locate_d(info, b, i, j, &reg, &lane);
        if (info.cd_type == T::F64) {
          uint64_t lo = ops.c[reg * 64 + lane], hi = ops.c[(reg + 1) * 64 + lane];
          double acc = num::f64_from_bits(lo | (hi << 32));
          if (neg & 4) acc = -acc;
          for (int k = 0; k < K; ++k) acc = std::fma(arow[k], bbuf[(b * K + k) * N + j], acc);
          uint64_t r = num::bits_from_f64(acc);
          out[reg * 64 + lane] = static_cast<uint32_t>(r);
          out[(reg + 1) * 64 + lane] = static_cast<uint32_t>(r >> 32);
        } else if (info.cd_type == T::I32) {
          int64_t acc = 0;
          for (int k = 0; k < K; ++k)
            acc += static_cast<int64_t>(arow[k]) * static_cast<int64_t>(bbuf[(b * K + k) * N + j]);
          acc += static_cast<int32_t>(ops.c[reg * 64 + lane]);
          out[reg * 64 + lane] = static_cast<uint32_t>(static_cast<uint64_t>(acc));
        } else {
          double sum = 0.0;
          if (info.is_scaled) {
            for (int kb = 0; kb < KB; ++kb) {
              double part = 0.0;
              for (int k = kb * 32; k < kb * 32 + 32; ++k) part += arow[k] * bbuf[(b * K + k) * N + j];
              sum += part * sa[i * KB + kb] * sb[j * KB + kb];
            }
          } else {
            for (int k = 0; k < K; ++k) sum += arow[k] * bbuf[(b * K + k) * N + j];
          }
          const double c = static_cast<double>(num::f32_from_bits(ops.c[reg * 64 + lane]));
          out[reg * 64 + lane] = num::bits_from_f32(num::f32_round(sum + c));
        }
      }
    }
  }
  std::memcpy(ops.d, out, sizeof(uint32_t) * 64 * info.cd_regs);
}

}  // namespace mmemu
