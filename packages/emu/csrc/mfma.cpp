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
//    C = 32 (blog figure; for 16x16x128 fp4 also AITER's MXFP4 fmoe object, whose result is wrong
//    with C = 16).
//    fp6/bf6 is taken as one pass of C = 32 like fp4. With A and B of one width and one scale for all
//    k-blocks the pass layout cannot be seen in D (k is relabelled alike in both); AMD's FPSan tests check
//    exactly that case on MI350 (all widths packed as two passes of 16, 6-bit fields across dwords) and
//    the emulator agrees (test_probe_scaled_16x16x128_hardware_packing): fp6 packing and decoding are
//    verified, which k-block's scale covers which fp6 slot is not (UNVERIFIED: no AITER object, no figure).
//    Mixed fp8 x fp4/fp6 pairs elements by these k formulas (blog figures), also not exercised by AITER.
//    D[i][j] -> lane N*((i/4) % G) + j, register 4*((i/4) / G) + i%4.
//  * multi-block forms (4x4x4_16b, 16x16x4_4b, 32x32x4_2b, ..._f32 _xb): block b's A[i][k] in lane
//    M*b + i, element k; D as above with a register offset (M*N/64)*b, except 4x4 (16 blocks):
//    D[i][j] of block b in register i, lane 4*b + j.
//  * f64: 16x16x4: A[i][k] lane 16*k + i (one f64 = 2 regs); D[i][j] lane 16*(i%4) + j, register
//    pair 2*(i/4). 4x4x4_4b: A[i][k] of block b in lane 4*b + 16*k + i; D lane 16*(i%4) + 4*b + j.
//  * scaled f8f6f4 (gfx950): one E8M0 scale per 32 consecutive k of a row of A (column of B).
//    The scale of A row i, k-block kb sits in lane M*kb + i of the scale VGPR (byte = op_sel);
//    for B column j in lane N*kb + j (ROCm blog figure: Ax[i][kb] in lane 32*kb + i for 32x32x64;
//    16x16x128 by the same rule, and op_sel {op_sel, op_sel_hi} bits -> byte 2*hi + lo: AITER's MXFP4
//    fmoe object (fp4 x fp4, op_sel bytes 0-3) matches float64 with this and is off by ~1 with the
//    k-blocks reversed or permuted, the four scales in one lane's bytes, or the op_sel bits swapped.
//    With fp8/fp6 operands the 16x16x128 scale layout is the same rule, not exercised by any AITER object).
//
// Modifiers (calculator README / CDNA3 ISA): CBSZ/ABID (multi-block forms): block b reads A's block
// (b & ~(2^CBSZ - 1)) | ABID. BLGP (multi-block and f32 forms): B's lanes are read through a lane
// pattern (0 identity; 1 lanes 32-63 read 0-31; 2 lanes 0-31 read 32-63; 3 rotate: lane L reads
// L+16 mod 64; 4..7: every 16-lane group reads group BLGP-4). f64 forms: the BLGP field is NEG.
// f8f6f4 forms: CBSZ / BLGP are A / B formats (0 fp8, 1 bf8, 2 fp6, 3 bf6, 4 fp4).
//
// ## Numerics
// AMD does not document the MFMA datapath bit-exactly. Two models:
//  * gfx942 (CDNA3), f16 / bf16 / fp8 / bf8 / f32 inputs with f32 output: the accumulation measured
//    on MI300X by MMA-Sim (see "CDNA3 accumulation model" below: grouped fused sums with truncation,
//    one RNE rounding per group; f32 as an fma chain).
//  * gfx950 (CDNA4) and the scaled forms (no published measurement): inputs decoded exactly; every
//    product a*b exact in double (<= 24+24 significant bits); the products of one output element
//    summed in double in ascending k, then C added, then one rounding to f32 (RNE, f32 denormals
//    kept). Scaled forms: each 32-wide k-block's partial sum times 2^(sa-127) * 2^(sb-127) (exact),
//    block sums added in ascending k-block order, then C, then one rounding. A scale of 0xFF (NaN)
//    makes the element NaN.
//  * Both: input denormals honoured (the f16/bf16 MFMA flush-to-zero is documented for MI200 only
//    and MMA-Sim models it for CDNA2 only), NaN/Inf propagate.
//  * i8 forms: exact integer dot product, C added, wrapped to 32 bits.
//  * f64 forms: fused multiply-add chain in ascending k starting from C (one rounding per step).
#include "mfma.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

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

// ------------------------------------------------------------------------------------------------
// Precomputed gather/scatter tables (built once, on first use): for every form and operand format
// the (lane, bit offset) of each A[b][i][k] / B[b][j][k] and the register*64+lane of each D[b][i][j].
namespace {
struct Gather { std::vector<uint16_t> lane, bit; int width = 0; };
struct Layout {
  Gather a[8], b[8];            // index = format selector (f8f6f4: CBSZ / BLGP; other forms: 0 only)
  std::vector<uint16_t> d;      // (b*M + i)*N + j -> reg*64 + lane
};

void build_gather(const MfmaInfo& info, bool is_a, int sel, Gather& g) {
  const MfmaType t = is_a ? info.a_type : info.b_type;
  const ElemFmt ef = elem_fmt(t, info.gfx950, sel);
  const int regs = t == T::F8F6F4 ? regs_for_sel(sel) : (is_a ? info.a_regs : info.b_regs);
  const int X = is_a ? info.M : info.N;
  g.width = ef.width;
  g.lane.resize(static_cast<size_t>(info.blocks) * X * info.K);
  g.bit.resize(g.lane.size());
  for (int b = 0; b < info.blocks; ++b)
    for (int x = 0; x < X; ++x)
      for (int k = 0; k < info.K; ++k) {
        int lane, e;
        locate_ab(info, ef, regs, b, x, k, &lane, &e);
        const size_t idx = (static_cast<size_t>(b) * X + x) * info.K + k;
        g.lane[idx] = static_cast<uint16_t>(lane);
        g.bit[idx] = static_cast<uint16_t>(e * ef.width);
      }
}

struct Layouts {
  Layout l[2][kNumRows];
  Layouts() {
    const Tables& t = tables();
    for (int arch = 0; arch < 2; ++arch)
      for (int r = 0; r < t.count[arch]; ++r) {
        const MfmaInfo& info = t.info[arch][r];
        Layout& L = l[arch][info.index];
        const int nsel = info.a_type == T::F8F6F4 ? 8 : 1;
        for (int s = 0; s < nsel; ++s) { build_gather(info, true, s, L.a[s]); build_gather(info, false, s, L.b[s]); }
        L.d.resize(static_cast<size_t>(info.blocks) * info.M * info.N);
        for (int b = 0; b < info.blocks; ++b)
          for (int i = 0; i < info.M; ++i)
            for (int j = 0; j < info.N; ++j) {
              int reg, lane;
              locate_d(info, b, i, j, &reg, &lane);
              L.d[(static_cast<size_t>(b) * info.M + i) * info.N + j] = static_cast<uint16_t>(reg * 64 + lane);
            }
      }
  }
};
const Layout& layout_of(const MfmaInfo& info) {
  static const Layouts ls;
  return ls.l[info.gfx950 ? 1 : 0][info.index];
}

inline uint32_t raw_bits(const uint32_t* regs, int lane, int bit, int width) {
  const int r = bit >> 5, o = bit & 31;
  uint32_t v = regs[r * 64 + lane] >> o;
  if (o + width > 32) v |= regs[(r + 1) * 64 + lane] << (32 - o);
  return width == 32 ? v : (v & ((1u << width) - 1u));
}

// Gather n elements (table entries [first, first+n)) into out, decoding with the element format.
void gather(const ElemFmt& ef, const uint32_t* regs, const Gather& g, size_t first, int n, int blgp_lanes, double* out) {
  const uint16_t* ln = g.lane.data() + first;
  const uint16_t* bt = g.bit.data() + first;
  auto lane_of = [&](int q) { return blgp_lanes ? blgp_src_lane(blgp_lanes, ln[q]) : static_cast<int>(ln[q]); };
  switch (ef.e) {
    case Elem::F32:
      for (int q = 0; q < n; ++q) out[q] = num::f32_from_bits(regs[(bt[q] >> 5) * 64 + lane_of(q)]);
      break;
    case Elem::F64:
      for (int q = 0; q < n; ++q) {
        const int l = lane_of(q), r = (bt[q] >> 5);
        out[q] = num::f64_from_bits(regs[r * 64 + l] | (static_cast<uint64_t>(regs[(r + 1) * 64 + l]) << 32));
      }
      break;
    case Elem::F16:
      for (int q = 0; q < n; ++q) out[q] = num::f16_to_f32(static_cast<uint16_t>(raw_bits(regs, lane_of(q), bt[q], 16)));
      break;
    case Elem::BF16:
      for (int q = 0; q < n; ++q) out[q] = num::bf16_to_f32(static_cast<uint16_t>(raw_bits(regs, lane_of(q), bt[q], 16)));
      break;
    case Elem::I8:
      for (int q = 0; q < n; ++q) out[q] = static_cast<int8_t>(raw_bits(regs, lane_of(q), bt[q], 8));
      break;
    case Elem::N8: {
      const double* lut = narrow_lut().v[static_cast<int>(ef.f)];
      for (int q = 0; q < n; ++q) out[q] = lut[raw_bits(regs, lane_of(q), bt[q], ef.width)];
      break;
    }
  }
}
}  // namespace

// ------------------------------------------------------------------------------------------------
// CDNA3 (gfx942) accumulation model for the f16 / bf16 / fp8 forms: the arithmetic that MMA-Sim
// (Xie et al., "MMA-Sim: Bit-Accurate Reference Model of Tensor Cores and Matrix Cores",
// arXiv:2511.10909, Microsoft Research) derived from MI300X measurements and validated bitwise
// against the hardware. Implemented here from that description:
//  * K is processed in groups of G consecutive k (f16/bf16: G = min(8, K); fp8/bf8: G = 16), in
//    ascending order; the running f32 accumulator starts at C and is rounded (RNE) to f32 after
//    every group.
//  * In a group, each exact product a*b = (sa*sb) * 2^(ea+eb) (sa, sb the input significands,
//    denormals with the format's minimum exponent) is aligned to the group's largest product
//    exponent E and truncated toward zero to 24 fractional bits; the aligned terms are added exactly.
//    fp8/bf8: even-k and odd-k products form two such sums (each with its own E), each of which is
//    then aligned to the larger of the two exponents with floor (toward -inf) to 24 fractional bits.
//  * The group sum and the accumulator are aligned to the larger of their exponents Emax: the sum
//    with floor to 31 fractional bits, the accumulator with floor to 24 fractional bits (fp8/bf8: the
//    accumulator is dropped when its exponent is below Emax - 25). Both are added exactly and rounded
//    to f32 with round-to-nearest-even.
//  * A NaN or Inf anywhere (input or product) gives the IEEE sum of the exact products and C.
// The f32 forms are a chain of f32 fused multiply-adds in ascending k starting from C.
// MMA-Sim covers CDNA1-3 only; gfx950 keeps the exact model described at the top of this file.
namespace {
struct Term { int64_t m; int e; };  // value m * 2^e, m an integer significand

// An element as (integer significand m, exponent e): value = m * 2^(e - frac_bits), e >= emin; zero -> m = 0.
// Read from the bits of the (exactly representable) double.
inline Term split_int(double v, int frac_bits, int emin) {
  const uint64_t u = num::bits_from_f64(v);
  const int biased = static_cast<int>((u >> 52) & 0x7ff);
  if (biased == 0) return {0, 0};  // zero (no input format here has values in the f64 denormal range)
  const int ex = biased - 1023;
  const uint64_t sig = (u & ((uint64_t(1) << 52) - 1)) | (uint64_t(1) << 52);
  int e = ex, shift = 52 - frac_bits;
  if (ex < emin) { shift += emin - ex; e = emin; }
  const int64_t m = shift >= 64 ? 0 : static_cast<int64_t>(sig >> shift);
  return {(u >> 63) ? -m : m, e};
}

inline double pow2(int e) { return num::f64_from_bits(static_cast<uint64_t>(e + 1023) << 52); }  // normal range only

inline int64_t shift_trunc(int64_t v, int sh) {      // v * 2^sh, toward zero
  if (sh >= 0) return sh > 62 ? 0 : v * (int64_t(1) << sh);
  if (sh <= -63) return 0;
  const int64_t a = (v < 0 ? -v : v) >> (-sh);
  return v < 0 ? -a : a;
}
inline int64_t shift_floor(int64_t v, int sh) {      // floor(v * 2^sh)
  if (sh >= 0) return sh > 62 ? 0 : v * (int64_t(1) << sh);
  if (sh <= -63) return v < 0 ? -1 : 0;
  return v >> (-sh);                                 // arithmetic shift = floor (gcc/clang, C++20 defined)
}

constexpr int kNoExp = -100000;

// Sum of products p_q = ma*mb * 2^(ea+eb-fa-fb), each aligned to the largest "normalised" product
// exponent E (= ea+eb) and truncated to 24 fractional bits. Returns S with value S * 2^(E-24).
inline int64_t fused_group_sum(const Term* a, const Term* b, int n, int stride, int fa, int fb, int* E_out) {
  int64_t pm[16];
  int pe[16];
  int E = kNoExp, cnt = 0;
  for (int q = 0; q < n; q += stride, ++cnt) {
    pm[cnt] = a[q].m * b[q].m;  // <= 2^22 (f16) / 2^16 (bf16) / 2^8 (fp8)
    pe[cnt] = a[q].e + b[q].e;
    if (pm[cnt] != 0 && pe[cnt] > E) E = pe[cnt];
  }
  int64_t S = 0;
  if (E != kNoExp) {
    const int base = 24 - E - fa - fb;
    for (int q = 0; q < cnt; ++q) {
      const int sh = base + pe[q];  // <= 24 - fa - fb: the shifted magnitude stays below 2^47
      const int64_t v = pm[q];
      uint64_t mag = static_cast<uint64_t>(v < 0 ? -v : v);
      mag = sh >= 0 ? (mag << sh) : (sh > -63 ? (mag >> -sh) : 0);
      S += v < 0 ? -static_cast<int64_t>(mag) : static_cast<int64_t>(mag);
    }
  }
  *E_out = E;
  return S;
}

// One group of n products fused with the accumulator c (f32). fa/fb: fraction bits of A/B.
inline float cdna3_group(const double* av, const double* bv, const Term* a, const Term* b, int n, int fa, int fb,
                         bool fp8, float c, bool maybe_special) {
  // specials: NaN / Inf inputs or products, and products beyond the f32 range (checked only when the
  // operands can produce them: maybe_special is computed once per instruction)
  if (maybe_special || !std::isfinite(c)) {
    bool special = !std::isfinite(c);
    bool p_inf = false, n_inf = false;
    for (int q = 0; q < n; ++q) {
      const double p = av[q] * bv[q];
      if (!std::isfinite(av[q]) || !std::isfinite(bv[q])) special = true;
      if (p >= 0x1p128) p_inf = true;
      if (p <= -0x1p128) n_inf = true;
    }
    if (special) {
      double sum = static_cast<double>(c);
      for (int q = 0; q < n; ++q) sum += av[q] * bv[q];
      return static_cast<float>(sum);
    }
    if (p_inf || n_inf) return p_inf && n_inf ? std::nanf("") : (p_inf ? INFINITY : -INFINITY);
  }

  int E;
  int64_t S;  // value S * 2^(E - 24)
  if (!fp8) {
    S = fused_group_sum(a, b, n, 1, fa, fb, &E);
  } else {
    int E0, E1;
    const int64_t S0 = fused_group_sum(a, b, n, 2, fa, fb, &E0);
    const int64_t S1 = fused_group_sum(a + 1, b + 1, n - 1, 2, fa, fb, &E1);
    E = std::max(E0, E1);
    S = (E0 == kNoExp ? 0 : shift_floor(S0, E0 - E)) + (E1 == kNoExp ? 0 : shift_floor(S1, E1 - E));
  }
  const Term ct = split_int(static_cast<double>(c), 23, -126);  // c = ct.m * 2^(ct.e - 23)
  const int ec = ct.m == 0 ? kNoExp : ct.e;
  if (E == kNoExp && ec == kNoExp) return 0.0f;
  const int Emax = std::max(E, ec);
  // group sum: floor to 31 fractional bits relative to Emax -> T * 2^(Emax - 31)
  const int64_t T = E == kNoExp ? 0 : shift_floor(S, 7 + E - Emax);
  // accumulator: floor to 24 fractional bits relative to Emax -> U * 2^(Emax - 24)
  int64_t U = 0;
  if (ec != kNoExp && !(fp8 && ec < Emax - 25)) U = shift_floor(ct.m, 1 + ec - Emax);
  const double r = static_cast<double>(T + U * 128) * pow2(Emax - 31);  // exact (Emax - 31 > -1022)
  return static_cast<float>(r);  // RNE to f32
}

// Combine a group sum S (value S * 2^(E-24), E == kNoExp if empty) with the accumulator c.
inline float cdna3_combine(int64_t S, int E, float c, bool fp8) {
  const uint32_t cu = num::bits_from_f32(c);
  const int cexp = static_cast<int>((cu >> 23) & 0xff);
  int64_t cm = static_cast<int64_t>((cu & 0x7fffff) | (cexp ? 0x800000u : 0u));
  if (cu >> 31) cm = -cm;
  const int ec = cm == 0 ? kNoExp : (cexp ? cexp - 127 : -126);
  if (E == kNoExp && ec == kNoExp) return 0.0f;
  const int Emax = std::max(E, ec);
  const int64_t T = E == kNoExp ? 0 : shift_floor(S, 7 + E - Emax);
  int64_t U = 0;
  if (ec != kNoExp && !(fp8 && ec < Emax - 25)) U = shift_floor(cm, 1 + ec - Emax);
  return static_cast<float>(static_cast<double>(T + U * 128) * pow2(Emax - 31));
}

// The same model evaluated for all N outputs of a row at once (j innermost: independent lanes the
// compiler can vectorise). Requires finite inputs and no product overflow (checked by the caller).
void cdna3_rows(const Term* at, const Term* bt, const double* abuf, const double* bbuf, const uint32_t* c,
                const uint16_t* dmap, int NB, int M, int N, int K, int G, bool fp8, uint32_t* out) {
  // B as [b][k][j] significands / exponents
  static thread_local std::vector<double> bv;
  static thread_local std::vector<int> be;
  bv.resize(static_cast<size_t>(NB) * K * N);
  be.resize(bv.size());
  for (int b = 0; b < NB; ++b)
    for (int j = 0; j < N; ++j)
      for (int k = 0; k < K; ++k) {
        const Term& t = bt[(static_cast<size_t>(b) * N + j) * K + k];
        bv[(static_cast<size_t>(b) * K + k) * N + j] = bbuf[(static_cast<size_t>(b) * N + j) * K + k];
        be[(static_cast<size_t>(b) * K + k) * N + j] = t.m ? t.e : kNoExp / 2;  // zero: never the max
      }
  const int nhalf = fp8 ? 2 : 1;
  for (int b = 0; b < NB; ++b)
    for (int i = 0; i < M; ++i) {
      const Term* arow = &at[(static_cast<size_t>(b) * M + i) * K];
      const double* aval = &abuf[(static_cast<size_t>(b) * M + i) * K];
      const double* bval = bv.data();
      float acc[32];
      for (int j = 0; j < N; ++j) acc[j] = num::f32_from_bits(c[dmap[(static_cast<size_t>(b) * M + i) * N + j]]);
      for (int k0 = 0; k0 < K; k0 += G) {
        const int n = std::min(G, K - k0);
        int64_t Sh[2][32];
        int Eh[2][32];
        for (int h = 0; h < nhalf; ++h) {
          int* E = Eh[h];
          int64_t* S = Sh[h];
          for (int j = 0; j < N; ++j) { E[j] = kNoExp; S[j] = 0; }
          for (int q = h; q < n; q += nhalf) {
            const Term ta = arow[k0 + q];
            if (ta.m == 0) continue;
            const int* ber = &be[(static_cast<size_t>(b) * K + k0 + q) * N];
            for (int j = 0; j < N; ++j) E[j] = std::max(E[j], ta.e + ber[j]);
          }
          // aligned, truncated terms: trunc(p * 2^(24 - E)) with p = a*b exact in double, the scaling
          // exact (power of two), the conversion truncating toward zero
          double scale[32];
          int32_t S32[32];
          for (int j = 0; j < N; ++j) { scale[j] = E[j] <= kNoExp / 2 ? 0.0 : pow2(24 - E[j]); S32[j] = 0; }
          for (int q = h; q < n; q += nhalf) {
            const Term ta = arow[k0 + q];
            if (ta.m == 0) continue;
            const double av = aval[k0 + q];
            const double* bvr = &bval[(static_cast<size_t>(b) * K + k0 + q) * N];
            // |term| < 2^26 and at most 16 terms: int32 lanes (cvttpd2dq truncates toward zero)
            for (int j = 0; j < N; ++j) S32[j] += static_cast<int32_t>(av * bvr[j] * scale[j]);
          }
          for (int j = 0; j < N; ++j) S[j] = S32[j];
        }
        for (int j = 0; j < N; ++j) {
          int E;
          int64_t S;
          if (!fp8) {
            E = Eh[0][j] <= kNoExp / 2 ? kNoExp : Eh[0][j];
            S = Sh[0][j];
          } else {
            const int E0 = Eh[0][j] <= kNoExp / 2 ? kNoExp : Eh[0][j];
            const int E1 = Eh[1][j] <= kNoExp / 2 ? kNoExp : Eh[1][j];
            E = std::max(E0, E1);
            S = (E0 == kNoExp ? 0 : shift_floor(Sh[0][j], E0 - E)) + (E1 == kNoExp ? 0 : shift_floor(Sh[1][j], E1 - E));
          }
          acc[j] = cdna3_combine(S, E, acc[j], fp8);
        }
      }
      for (int j = 0; j < N; ++j) out[dmap[(static_cast<size_t>(b) * M + i) * N + j]] = num::bits_from_f32(acc[j]);
    }
}

inline int frac_bits_of(const ElemFmt& ef) {
  switch (ef.e) {
    case Elem::F16: return 10;
    case Elem::BF16: return 7;
    case Elem::N8: return num::fmt_desc(ef.f).mbits;
    default: return 23;
  }
}
inline int emin_of(const ElemFmt& ef) {
  switch (ef.e) {
    case Elem::F16: return -14;
    case Elem::BF16: return -126;
    case Elem::N8: return 1 - num::fmt_desc(ef.f).bias;
    default: return -126;
  }
}
}  // namespace

void mfma_execute(const MfmaInfo& info, const MfmaOperands& ops) {
  const int M = info.M, N = info.N, K = info.K, NB = info.blocks;
  const bool f8f6f4 = info.a_type == T::F8F6F4;
  const int a_sel = f8f6f4 ? (ops.cbsz & 7) : 0;
  const int b_sel = f8f6f4 ? (ops.blgp & 7) : 0;
  const ElemFmt efa = elem_fmt(info.a_type, info.gfx950, a_sel);
  const ElemFmt efb = elem_fmt(info.b_type, info.gfx950, b_sel);
  const Layout& L = layout_of(info);
  const int neg = info.blgp_is_neg ? ((ops.neg | ops.blgp) & 7) : 0;
  const int blgp_lanes = info.blgp_lanes ? (ops.blgp & 7) : 0;

  // A as [b][i][k], B transposed as [b][j][k] (both contiguous in k), decoded exactly to double.
  double abuf[4096], bbuf[4096];  // largest: 32x32x64 / 16x16x128 (2048 elements)
  for (int b = 0; b < NB; ++b) {
    int asrc = b;
    if (info.cbsz_abid && ops.cbsz > 0) asrc = (b & ~((1 << ops.cbsz) - 1)) | (ops.abid & ((1 << ops.cbsz) - 1));
    gather(efa, ops.a, L.a[a_sel], static_cast<size_t>(asrc) * M * K, M * K, 0, abuf + static_cast<size_t>(b) * M * K);
    gather(efb, ops.b, L.b[b_sel], static_cast<size_t>(b) * N * K, N * K, blgp_lanes, bbuf + static_cast<size_t>(b) * N * K);
  }
  if (neg & 1) for (int q = 0; q < NB * M * K; ++q) abuf[q] = -abuf[q];
  if (neg & 2) for (int q = 0; q < NB * N * K; ++q) bbuf[q] = -bbuf[q];

  // Scales (scaled forms): one E8M0 per 32 k per row of A / column of B.
  const int KB = info.is_scaled ? K / 32 : 1;
  double sa[32 * 4], sb[32 * 4];
  if (info.is_scaled) {
    const int sha = 8 * (ops.scale_a_opsel & 3), shb = 8 * (ops.scale_b_opsel & 3);
    for (int kb = 0; kb < KB; ++kb) {
      for (int i = 0; i < M; ++i)
        sa[i * KB + kb] = num::e8m0_to_f64(ops.scale_a ? static_cast<uint8_t>(ops.scale_a[M * kb + i] >> sha) : 127);
      for (int j = 0; j < N; ++j)
        sb[j * KB + kb] = num::e8m0_to_f64(ops.scale_b ? static_cast<uint8_t>(ops.scale_b[N * kb + j] >> shb) : 127);
    }
  }

  // Compute into a temporary (c may alias d).
  uint32_t out[64 * 32];
  const uint16_t* dmap = L.d.data();
  const bool cdna3_model = !info.gfx950 && info.cd_type == T::F32 && !info.is_scaled &&
                           (efa.e == Elem::F16 || efa.e == Elem::BF16 || efa.e == Elem::N8 || efa.e == Elem::F32);
  if (cdna3_model) {
    if (efa.e == Elem::F32) {
      // f32 forms: fused multiply-add chain in f32, ascending k, from C
      for (int b = 0; b < NB; ++b)
        for (int i = 0; i < M; ++i)
          for (int j = 0; j < N; ++j) {
            const double* arow = &abuf[(static_cast<size_t>(b) * M + i) * K];
            const double* bcol = &bbuf[(static_cast<size_t>(b) * N + j) * K];
            const int di = dmap[(static_cast<size_t>(b) * M + i) * N + j];
            float acc = num::f32_from_bits(ops.c[di]);
            for (int k = 0; k < K; ++k) acc = std::fmaf(static_cast<float>(arow[k]), static_cast<float>(bcol[k]), acc);
            out[di] = num::bits_from_f32(acc);
          }
    } else {
      const bool fp8 = efa.e == Elem::N8;
      const int G = fp8 ? 16 : std::min(8, K);
      const int fa = frac_bits_of(efa), fb = frac_bits_of(efb), ea = emin_of(efa), eb = emin_of(efb);
      Term at[4096], bt[4096];
      double amax = 0.0, bmax = 0.0;
      bool nonfinite = false;
      for (int q = 0; q < NB * M * K; ++q) {
        at[q] = split_int(abuf[q], fa, ea);
        nonfinite |= !std::isfinite(abuf[q]);
        amax = std::max(amax, std::fabs(abuf[q]));
      }
      for (int q = 0; q < NB * N * K; ++q) {
        bt[q] = split_int(bbuf[q], fb, eb);
        nonfinite |= !std::isfinite(bbuf[q]);
        bmax = std::max(bmax, std::fabs(bbuf[q]));
      }
      // NaN/Inf in C, or a running sum that can leave the f32 range, also take the careful path
      // (the fast path assumes finite accumulators throughout).
      for (int q = 0; q < NB * M * N; ++q) nonfinite |= !std::isfinite(num::f32_from_bits(ops.c[dmap[q]]));
      const bool maybe_special = nonfinite || amax * bmax * K >= 0x1p127;
      if (!maybe_special) {
        cdna3_rows(at, bt, abuf, bbuf, ops.c, dmap, NB, M, N, K, G, fp8, out);
      } else for (int b = 0; b < NB; ++b)
        for (int i = 0; i < M; ++i)
          for (int j = 0; j < N; ++j) {
            const size_t ao = (static_cast<size_t>(b) * M + i) * K, bo = (static_cast<size_t>(b) * N + j) * K;
            const int di = dmap[(static_cast<size_t>(b) * M + i) * N + j];
            float acc = num::f32_from_bits(ops.c[di]);
            for (int k0 = 0; k0 < K; k0 += G)
              acc = cdna3_group(&abuf[ao + k0], &bbuf[bo + k0], &at[ao + k0], &bt[bo + k0], std::min(G, K - k0), fa, fb,
                                fp8, acc, maybe_special);
            out[di] = num::bits_from_f32(acc);
          }
    }
  } else if (info.cd_type == T::F32) {
    // B as [b][k][j] so that the j loop runs over independent accumulators (vectorisable) while
    // each output element still sums its products in ascending k.
    double bkj[4096];
    for (int b = 0; b < NB; ++b)
      for (int j = 0; j < N; ++j)
        for (int k = 0; k < K; ++k)
          bkj[(static_cast<size_t>(b) * K + k) * N + j] = bbuf[(static_cast<size_t>(b) * N + j) * K + k];
    for (int b = 0; b < NB; ++b) {
      for (int i = 0; i < M; ++i) {
        const double* arow = &abuf[(static_cast<size_t>(b) * M + i) * K];
        double sum[32];
        for (int j = 0; j < N; ++j) sum[j] = 0.0;
        if (info.is_scaled) {
          for (int kb = 0; kb < KB; ++kb) {
            double part[32];
            for (int j = 0; j < N; ++j) part[j] = 0.0;
            for (int k = kb * 32; k < kb * 32 + 32; ++k) {
              const double a = arow[k];
              const double* brow = &bkj[(static_cast<size_t>(b) * K + k) * N];
              for (int j = 0; j < N; ++j) part[j] += a * brow[j];
            }
            for (int j = 0; j < N; ++j) sum[j] += part[j] * sa[i * KB + kb] * sb[j * KB + kb];
          }
        } else {
          for (int k = 0; k < K; ++k) {
            const double a = arow[k];
            const double* brow = &bkj[(static_cast<size_t>(b) * K + k) * N];
            for (int j = 0; j < N; ++j) sum[j] += a * brow[j];
          }
        }
        for (int j = 0; j < N; ++j) {
          const int di = dmap[(static_cast<size_t>(b) * M + i) * N + j];
          out[di] = num::bits_from_f32(num::f32_round(sum[j] + static_cast<double>(num::f32_from_bits(ops.c[di]))));
        }
      }
    }
  }
  for (int b = 0; b < NB && info.cd_type != T::F32; ++b) {
    for (int i = 0; i < M; ++i) {
      const double* arow = &abuf[(static_cast<size_t>(b) * M + i) * K];
      for (int j = 0; j < N; ++j) {
        const double* bcol = &bbuf[(static_cast<size_t>(b) * N + j) * K];
        const int di = dmap[(static_cast<size_t>(b) * M + i) * N + j];
        if (info.cd_type == T::F64) {
          // di is the first register of the pair: reg*64 + lane
          const int reg = di / 64, lane = di % 64;
          double acc = num::f64_from_bits(ops.c[reg * 64 + lane] | (static_cast<uint64_t>(ops.c[(reg + 1) * 64 + lane]) << 32));
          if (neg & 4) acc = -acc;
          for (int k = 0; k < K; ++k) acc = std::fma(arow[k], bcol[k], acc);
          const uint64_t r = num::bits_from_f64(acc);
          out[reg * 64 + lane] = static_cast<uint32_t>(r);
          out[(reg + 1) * 64 + lane] = static_cast<uint32_t>(r >> 32);
        } else {  // I32
          int64_t acc = 0;
          for (int k = 0; k < K; ++k) acc += static_cast<int64_t>(arow[k]) * static_cast<int64_t>(bcol[k]);
          acc += static_cast<int32_t>(ops.c[di]);
          out[di] = static_cast<uint32_t>(static_cast<uint64_t>(acc));
        }
      }
    }
  }
  std::memcpy(ops.d, out, sizeof(uint32_t) * 64 * info.cd_regs);
}

}  // namespace mmemu
