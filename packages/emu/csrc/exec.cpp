// moonmath-emu executor: waves of 64 lanes, workgroups with s_barrier, memory sanitizer, hazard checker.
#include "exec.hpp"

#include <algorithm>
#include <cfenv>
#include <climits>
#include <cstdlib>
#include <cmath>
#include <sstream>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <atomic>
#include <thread>
#include <immintrin.h>

#include "mfma.hpp"
#include "numerics.hpp"

namespace mmemu {

// ============================================================================ helpers
static inline float F(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline uint32_t B(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
static inline double D(uint64_t u) { double f; std::memcpy(&f, &u, 8); return f; }
static inline uint64_t BD(double f) { uint64_t u; std::memcpy(&u, &f, 8); return u; }
static inline uint64_t mk64(uint32_t lo, uint32_t hi) { return (uint64_t)hi << 32 | lo; }

static inline float h2f(uint32_t h) { return num::f16_to_f32((uint16_t)h); }
static inline uint32_t f2h(float f) { return num::f32_to_f16_rne(f); }

static inline bool is_snan32(uint32_t u) { return (u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu) && !(u & 0x400000u); }
static inline bool is_nan32(uint32_t u) { return (u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu); }
static inline uint32_t quiet32(uint32_t u) { return u | 0x400000u; }

// IEEE-mode v_max_f32 / v_min_f32 per the ISA pseudocode
static inline uint32_t vmax32(uint32_t a, uint32_t b, bool ieee) {
  if (ieee && is_snan32(a)) return quiet32(a);
  if (ieee && is_snan32(b)) return quiet32(b);
  if (is_nan32(a)) return b;
  if (is_nan32(b)) return a;
  float x = F(a), y = F(b);
  if (x == 0 && y == 0) return (a & 0x80000000u) ? b : a;  // +0 > -0
  return x >= y ? a : b;
}
static inline uint32_t vmin32(uint32_t a, uint32_t b, bool ieee) {
  if (ieee && is_snan32(a)) return quiet32(a);
  if (ieee && is_snan32(b)) return quiet32(b);
  if (is_nan32(a)) return b;
  if (is_nan32(b)) return a;
  float x = F(a), y = F(b);
  if (x == 0 && y == 0) return (a & 0x80000000u) ? a : b;  // -0 < +0
  return x <= y ? a : b;
}
static inline double dmax(double a, double b) { if (std::isnan(a)) return b; if (std::isnan(b)) return a; if (a == 0 && b == 0) return std::signbit(a) ? b : a; return a >= b ? a : b; }
static inline double dmin(double a, double b) { if (std::isnan(a)) return b; if (std::isnan(b)) return a; if (a == 0 && b == 0) return std::signbit(a) ? a : b; return a <= b ? a : b; }

// float -> int conversions with the hardware's saturation (NaN -> 0)
static inline int32_t cvt_i32(double f) { if (std::isnan(f)) return 0; if (f >= 2147483647.0) return INT32_MAX; if (f <= -2147483648.0) return INT32_MIN; return (int32_t)f; }
static inline uint32_t cvt_u32(double f) { if (std::isnan(f)) return 0; if (f >= 4294967295.0) return UINT32_MAX; if (f <= 0) return 0; return (uint32_t)f; }

static inline int exponent32(uint32_t u) { return (u >> 23) & 0xff; }

static uint32_t f32_class_bit(uint32_t u) {
  if (is_snan32(u)) return 0;
  if (is_nan32(u)) return 1;
  bool s = u >> 31;
  int e = exponent32(u);
  if (e == 255) return s ? 2 : 9;
  if (e > 0) return s ? 3 : 8;
  if (u & 0x7fffffu) return s ? 4 : 7;
  return s ? 5 : 6;
}
static uint32_t f64_class_bit(uint64_t u) {
  int e = (int)((u >> 52) & 0x7ff);
  uint64_t m = u & 0xfffffffffffffull;
  bool s = u >> 63;
  if (e == 0x7ff && m) return (m >> 51) & 1 ? 1 : 0;
  if (e == 0x7ff) return s ? 2 : 9;
  if (e > 0) return s ? 3 : 8;
  if (m) return s ? 4 : 7;
  return s ? 5 : 6;
}
static uint32_t f16_class_bit(uint32_t h) {
  h &= 0xffff;
  int e = (h >> 10) & 0x1f; uint32_t m = h & 0x3ff; bool s = h >> 15;
  if (e == 31 && m) return (m >> 9) & 1 ? 1 : 0;
  if (e == 31) return s ? 2 : 9;
  if (e > 0) return s ? 3 : 8;
  if (m) return s ? 4 : 7;
  return s ? 5 : 6;
}

// 64-lane f32 FMA: hardware FMA (AVX2+FMA, chosen at run time) or libm fmaf; both are the exactly
// rounded fused multiply-add, so results do not depend on the host CPU.
__attribute__((target("avx2,fma"))) static void fma64_avx2(uint32_t* d, const uint32_t* a, const uint32_t* b, const uint32_t* c) {
  for (int l = 0; l < 64; l += 8) {
    __m256 x = _mm256_loadu_ps(reinterpret_cast<const float*>(a + l));
    __m256 y = _mm256_loadu_ps(reinterpret_cast<const float*>(b + l));
    __m256 z = _mm256_loadu_ps(reinterpret_cast<const float*>(c + l));
    _mm256_storeu_ps(reinterpret_cast<float*>(d + l), _mm256_fmadd_ps(x, y, z));
  }
}
static void fma64_generic(uint32_t* d, const uint32_t* a, const uint32_t* b, const uint32_t* c) {
  for (int l = 0; l < 64; l++) d[l] = B(std::fmaf(F(a[l]), F(b[l]), F(c[l])));
}
static const bool g_has_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
static inline void fma_lanes(uint64_t m, uint32_t* d, const uint32_t* a, const uint32_t* b, const uint32_t* c) {
  if (m == ~0ull) { if (g_has_fma) fma64_avx2(d, a, b, c); else fma64_generic(d, a, b, c); return; }
  while (m) { int l = __builtin_ctzll(m); m &= m - 1; d[l] = B(std::fmaf(F(a[l]), F(b[l]), F(c[l]))); }
}

template <class Fn> static inline void lanes(uint64_t m, Fn f) {
  if (m == ~0ull) {
    for (int l = 0; l < 64; l++) f(l);
  } else {
    while (m) { int l = __builtin_ctzll(m); m &= m - 1; f(l); }
  }
}

// ============================================================================ module-level decode
enum : uint32_t { KEY_INVALID = 0xffffffffu };

struct MemOp { int bytes = 4; int nregs = 1; bool store = false, sext = false, d16 = false, d16hi = false, lds = false; int atomic = -1; bool atomic64 = false; };

static bool mem_op_of(const std::string& nm, MemOp& o) {
  // names: <seg>_load_{ubyte,sbyte,ushort,sshort,dword,dwordx2..4}[_d16[_hi]], <seg>_store_..., <seg>_atomic_*
  auto has = [&](const char* s) { return nm.find(s) != std::string::npos; };
  if (has("_atomic_")) {
    static const char* names[] = {"swap", "cmpswap", "add", "sub", "smin", "umin", "smax", "umax", "and", "or", "xor", "inc", "dec", "add_f32", "pk_add_f16", "add_f64", "min_f64", "max_f64", "pk_add_bf16"};
    std::string a = nm.substr(nm.find("_atomic_") + 8);
    o.atomic64 = a.size() > 3 && a.compare(a.size() - 3, 3, "_x2") == 0;
    if (o.atomic64) a = a.substr(0, a.size() - 3);
    for (int i = 0; i < 19; i++) if (a == names[i]) o.atomic = i;
    if (o.atomic < 0) return false;
    if (o.atomic >= 15 && o.atomic <= 17) o.atomic64 = true;
    o.bytes = o.atomic64 ? 8 : 4; o.nregs = o.atomic64 ? 2 : 1;
    return true;
  }
  o.store = has("_store_");
  if (!o.store && !has("_load_")) return false;
  o.lds = has("_load_lds_") || false;
  if (has("dwordx4")) { o.bytes = 16; o.nregs = 4; }
  else if (has("dwordx3")) { o.bytes = 12; o.nregs = 3; }
  else if (has("dwordx2")) { o.bytes = 8; o.nregs = 2; }
  else if (has("dword")) { o.bytes = 4; }
  else if (has("byte")) { o.bytes = 1; o.sext = has("sbyte"); }
  else if (has("short")) { o.bytes = 2; o.sext = has("sshort"); }
  else return false;
  if (has("_d16")) { o.d16 = true; o.d16hi = has("_d16_hi"); }
  if (has("format")) return false;
  return true;
}

struct RegRange { uint16_t base; uint16_t n; };
struct XInst {
  RegRange rd[6]; uint8_t nrd = 0;
  RegRange wr[3]; uint8_t nwr = 0;
  uint8_t ftype[3] = {0, 0, 0};  // 1 f32, 2 f64, 3 f16/bf16 (16-bit), for VOP3/DPP/SDWA modifiers
  bool is_trans = false, is_mfma = false;
  int avail = 3;  // bit 0: exists on gfx942, bit 1: on gfx950 (from LLVM's assembler)
  MemOp mop; bool mop_ok = false;  // VMEM access shape, parsed once from the mnemonic
  const MfmaInfo* mfma = nullptr;
  std::string err;  // decode error (KEY_INVALID)
};

struct Module::Impl {
  bool gfx950 = false;
  bool serial_only = false;  // global atomics or s_memtime: workgroups must run in order on one thread
  std::vector<Inst> insts;
  std::vector<XInst> x;
  std::vector<int32_t> va2idx;  // by vaddr/4
  int idx_of(uint64_t va) const {
    if (va & 3) return -1;
    if (va / 4 >= va2idx.size()) return -1;
    return va2idx[va / 4];
  }
};

static int tag_index(uint16_t code) {
  if (code < 128) return code;
  if (code >= OPC_VGPR && code < OPC_AGPR) return 128 + (code - OPC_VGPR);
  if (code >= OPC_AGPR && code < OPC_AGPR + 256) return 384 + (code - OPC_AGPR);
  return -1;
}

static void add_range(RegRange* arr, uint8_t& n, int cap, uint16_t code, int nbits) {
  int t = tag_index(code);
  if (t < 0 || n >= cap) return;
  int nr = nbits <= 32 ? 1 : (nbits + 31) / 32;
  arr[n++] = RegRange{(uint16_t)t, (uint16_t)nr};
}

static bool starts(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

static uint8_t ftype_of(const std::string& f) {
  if (f == "F32") return 1;
  if (f == "F64") return 2;
  if (f == "F16" || f == "BF16") return 3;
  return 0;
}

static void analyse(const Inst& in, XInst& x, bool gfx950) {
  const IsaRow* r = in.row;
  if (!r) return;
  const std::string& nm = r->name;
  int enc = in.enc;
  if (enc == ENC_VOP3P || enc == ENC_VOP3PX2) {
    if (starts(nm, "v_mfma") || starts(nm, "v_smfmac")) {
      x.is_mfma = true;
      x.mfma = mfma_lookup(nm.c_str(), gfx950);
    }
  }
  if (enc == ENC_FLAT || enc == ENC_GLOBAL || enc == ENC_SCRATCH || enc == ENC_MUBUF) x.mop_ok = mem_op_of(nm, x.mop);
  // architecture availability (LLVM's assembler, recorded in isa_tables.inc): for a VOP1/VOP2/VOPC
  // instruction the row of its own encoding decides
  x.avail = r->avail;
  static const char* trans[] = {"v_exp_", "v_log_", "v_rcp_", "v_rsq_", "v_sqrt_", "v_sin_", "v_cos_"};
  for (auto t : trans) if (starts(nm, t)) x.is_trans = true;
  // operand float types (for modifiers)
  const char* sn[3] = {"src0", "src1", "src2"};
  for (int i = 0; i < 3; i++) {
    std::string f = r->fmt(sn[i]);
    if (i == 1 && f.empty()) f = r->fmt("vsrc1");
    x.ftype[i] = ftype_of(f);
  }
  if (starts(nm, "v_cndmask")) { x.ftype[0] = 1; x.ftype[1] = 1; }
  // register reads / writes for the hazard checker
  switch (enc) {
    case ENC_SOP1: case ENC_SOP2: case ENC_SOPC:
      for (int i = 0; i < 2; i++) if (in.src[i] != OPC_NONE) add_range(x.rd, x.nrd, 6, in.src[i], in.nbits[i]);
      if (in.sdst != OPC_NONE && enc != ENC_SOPC) add_range(x.wr, x.nwr, 3, in.sdst, in.dst_bits);
      break;
    case ENC_SOPK:
      if (r->fields.count("sdst")) {
        if (in.op != 17 && in.op != 0) add_range(x.rd, x.nrd, 6, in.sdst, 32);
        if (in.op <= 1 || in.op == 14 || in.op == 15 || in.op == 17) add_range(x.wr, x.nwr, 3, in.sdst, 32);
      }
      break;
    case ENC_SMEM:
      add_range(x.rd, x.nrd, 6, in.sbase, r->bits("sbase", 64));
      if (in.soffset_en) add_range(x.rd, x.nrd, 6, in.soffset, 32);
      if (r->fields.count("sdata")) add_range(x.wr, x.nwr, 3, in.sdst, in.dst_bits);
      break;
    case ENC_VOP1: case ENC_VOP2: case ENC_VOPC: case ENC_VOP3: case ENC_VOP3P: case ENC_VOP3PX2: {
      for (int i = 0; i < 3; i++) if (in.src[i] != OPC_NONE) add_range(x.rd, x.nrd, 6, in.src[i], in.nbits[i] ? in.nbits[i] : 32);
      if (enc == ENC_VOP3PX2) { add_range(x.rd, x.nrd, 6, in.scale_src[0], 32); add_range(x.rd, x.nrd, 6, in.scale_src[1], 32); }
      if (in.dst != OPC_NONE) add_range(x.wr, x.nwr, 3, in.dst, in.dst_bits ? in.dst_bits : 32);
      if (in.sdst != OPC_NONE) add_range(x.wr, x.nwr, 3, in.sdst, 64);
      break;
    }
    case ENC_DS:
      for (int i = 0; i < 3; i++) if (in.src[i] != OPC_NONE) add_range(x.rd, x.nrd, 6, in.src[i], i == 0 ? 32 : in.nbits[i]);
      if (in.dst != OPC_NONE) add_range(x.wr, x.nwr, 3, in.dst, in.dst_bits);
      break;
    case ENC_FLAT: case ENC_GLOBAL: case ENC_SCRATCH:
      if (in.src[0] != OPC_NONE) add_range(x.rd, x.nrd, 6, in.src[0], in.nbits[0]);
      if (in.src[1] != OPC_NONE) add_range(x.rd, x.nrd, 6, in.src[1], in.nbits[1]);
      if (in.saddr != 0x7f && enc != ENC_FLAT) add_range(x.rd, x.nrd, 6, in.saddr, enc == ENC_SCRATCH ? 32 : 64);
      if (in.dst != OPC_NONE) add_range(x.wr, x.nwr, 3, in.dst, in.dst_bits);
      break;
    case ENC_MUBUF: case ENC_MTBUF: {
      if (enc == ENC_MUBUF && (in.op == 40 || in.op == 41)) break;  // buffer_wbl2 / buffer_inv: no operands
      if (in.offen || in.idxen) add_range(x.rd, x.nrd, 6, in.src[0], in.nbits[0]);
      add_range(x.rd, x.nrd, 6, in.srsrc, 128);
      add_range(x.rd, x.nrd, 6, in.soffset, 32);
      bool store = nm.find("store") != std::string::npos;
      bool atomic = nm.find("atomic") != std::string::npos;
      if (store || atomic) add_range(x.rd, x.nrd, 6, in.src[1], in.nbits[1]);
      if (!store && !in.lds && (!atomic || in.glc)) add_range(x.wr, x.nwr, 3, in.src[1], atomic ? (in.nbits[1] > 32 && nm.find("cmpswap") != std::string::npos ? in.nbits[1] / 2 : in.nbits[1]) : in.nbits[1]);
      break;
    }
  }
}

Module::Module(const uint8_t* data, size_t n) : co_(load_code_object(data, n)), impl_(new Impl) {
  impl_->gfx950 = co_.gfx950;
  impl_->va2idx.assign(co_.loaded.size() / 4 + 1, -1);
  for (auto& t : co_.text) {
    uint64_t va = t.first, end = t.first + t.second;
    if (end > co_.loaded.size()) end = co_.loaded.size();
    while (va < end) {
      Inst in; std::string err;
      in.pc = (uint32_t)va;
      XInst xi;
      if (!decode_inst(co_.loaded.data() + va, end - va, co_.gfx950, in, err)) {
        in = Inst(); in.pc = (uint32_t)va; in.size = 4; in.key = KEY_INVALID; xi.err = err;
      } else {
        analyse(in, xi, co_.gfx950);
      }
      impl_->va2idx[va / 4] = (int32_t)impl_->insts.size();
      impl_->insts.push_back(in);
      impl_->x.push_back(std::move(xi));
      va += in.size;
    }
  }
  // kernels whose workgroups could observe each other's order run on one thread (see Module::launch)
  for (auto& in : impl_->insts) {
    if (in.key == KEY_INVALID || !in.row) continue;
    const bool vmem = in.enc == ENC_FLAT || in.enc == ENC_GLOBAL || in.enc == ENC_MUBUF || in.enc == ENC_SCRATCH;
    if ((vmem && in.row->name.find("atomic") != std::string::npos) || (in.enc == ENC_SMEM && (in.op == 36 || in.op == 37)))
      impl_->serial_only = true;
  }
  // branch targets
  for (auto& in : impl_->insts) {
    if (in.key == KEY_INVALID) continue;
    if (in.enc == ENC_SOPP && (in.op == 2 || (in.op >= 4 && in.op <= 9)))
      in.target = impl_->idx_of((uint64_t)((int64_t)in.pc + 4 + 4 * (int64_t)in.simm));
  }
}
Module::~Module() = default;

std::vector<std::tuple<std::string, uint64_t, std::string>> Module::disassemble() const {
  std::vector<std::tuple<std::string, uint64_t, std::string>> out;
  for (auto& k : co_.kernels) {
    int i = impl_->idx_of(k.entry_vaddr);
    if (i < 0) continue;
    uint64_t end = k.entry_vaddr + k.code_size;
    for (; i < (int)impl_->insts.size() && impl_->insts[i].pc < end; i++) {
      const Inst& in = impl_->insts[i];
      std::string t = in.key == KEY_INVALID ? "<invalid: " + impl_->x[i].err + ">" : disasm_inst(in);
      out.emplace_back(k.name, in.pc, t);
    }
  }
  return out;
}

std::vector<std::string> Module::opcodes() const {
  std::vector<std::string> out;
  for (auto& k : co_.kernels) {
    int i = impl_->idx_of(k.entry_vaddr);
    if (i < 0) continue;
    uint64_t end = k.entry_vaddr + k.code_size;
    for (; i < (int)impl_->insts.size() && impl_->insts[i].pc < end; i++) {
      const Inst& in = impl_->insts[i];
      if (in.key == KEY_INVALID) out.push_back("<invalid>");
      else out.push_back(in.row->name + ((in.row->vop3sd && in.op >= 281 && in.op <= 286) ? "_e64" : ""));
    }
  }
  return out;
}

// ============================================================================ execution state
struct LdsMeta {  // 16 bytes per LDS dword
  uint32_t wepoch = 0, repoch = 0;
  uint16_t writer = 0, reader = 0;  // wave id + 1; reader 0xffff = several
  uint32_t wseq : 30;               // sequence number of the pending write (low bits; see lds_track)
  uint32_t wkind : 2;               // pending kind of the write (1 VM, 2 DS), 0 = retired
  LdsMeta() : wseq(0), wkind(0) {}
};

enum { TK_NONE = 0, TK_VM = 1, TK_DS = 2, TK_SM = 3 };
enum { WS_RUN = 0, WS_BARRIER = 1, WS_DONE = 2, WS_YIELD = 3 };

// A direct-to-LDS load's data for one lane (<= 16 bytes): it lands in LDS when the load retires.
struct DmaWrite {
  uint64_t seq;
  uint32_t la, n;
  uint8_t data[16];
};

struct Wave {
  uint32_t s[128 + 32];  // + slack: a malformed operand range past s127 cannot reach other state
  uint32_t* v = nullptr;  // 512 rows x 64 (VGPRs then AGPRs)
  bool scc = false;
  int pc = 0, state = WS_RUN, id = 0;
  uint32_t mode = 0;
  uint32_t spec[4][2];
  alignas(64) uint32_t bc[4][2][64];  // broadcast scalar sources
  uint32_t tmp[4][2][64];
  uint32_t dtmp[2][64];
  uint64_t gaddr[64];  // per-lane global addresses (VMEM fast path)
  // hazard tracking
  uint64_t vm_issued = 0, vm_done = 0, ds_issued = 0, ds_done = 0, sm_issued = 0, sm_done = 0;
  std::vector<uint64_t> vm_bar, ds_bar;  // vm_done / ds_done when arriving at the barrier ending interval e
  uint8_t tkind[640];
  uint64_t tseq[640];
  // direct-to-LDS loads not yet landed (in issue order); see Ctx::land_dma
  std::vector<DmaWrite> dma;
  bool resume = false;  // the s_waitcnt at pc already yielded once: now it retires
  uint64_t since_barrier = 0;  // instructions since the last barrier (watchdog)
  std::vector<uint8_t> priv;  // private (scratch) memory: 64 lanes x private size
  // lane checker (Ctx::lane_*), per VGPR/AGPR row (v0..v255, a0..a255): lanes whose value is defined,
  // lanes written by the row's last write, that write's instruction index, and the origin (index into
  // Ctx::lane_origins, -1 none) of the row's undefined lanes
  uint64_t ldef[512], llw[512];
  int32_t lwpc[512], lorig[512];
  uint64_t exec() const { return mk64(s[126], s[127]); }
  void set_exec(uint64_t e) { s[126] = (uint32_t)e; s[127] = (uint32_t)(e >> 32); }
  uint64_t vcc() const { return mk64(s[106], s[107]); }
  uint32_t* row(uint16_t code) { return v + (size_t)(code - OPC_VGPR) * 64; }
  bool pending() const { return vm_issued != vm_done || ds_issued != ds_done || sm_issued != sm_done; }
};

// A hazard site seen in report-only mode ("warn"): reported once, with how often it was hit.
struct HazardSite { std::string message; uint64_t count = 0; uint64_t wg = 0; };

struct SR {
  const uint32_t* p; uint32_t m;  // p: 64 lanes
  inline uint32_t operator[](int l) const { return p[l]; }
};

// Instructions a wave runs before the next wave of its workgroup takes its turn (see Module::launch).
static const uint32_t kQuantum = [] {
  const char* e = std::getenv("MOONMATH_EMU_QUANTUM");
  unsigned long v = e ? std::strtoul(e, nullptr, 10) : 1ul;
  return (uint32_t)(v < 1 ? 1 : v);
}();

// MODE.GPR_IDX_EN (bit 27): VGPR index mode on (s_set_gpr_idx_on / _off)
static const uint32_t kModeGprIdxEn = 1u << 27;

static const uint64_t kSharedAperture = 0x0001000000000000ull;   // src_shared_base
static const uint64_t kPrivateAperture = 0x0002000000000000ull;  // src_private_base

struct Ctx {
  Module::Impl& M;
  const CodeObject& co;
  const KernelDesc& kd;
  const LaunchParams& P;
  bool gfx950;
  bool hz;
  std::vector<Region> regions;  // sorted by base
  std::vector<uint8_t> kernarg;
  std::vector<uint8_t> packet;
  std::vector<uint8_t> queue;
  std::vector<uint64_t> icount;
  // workgroup
  std::vector<Wave> waves;
  std::vector<uint32_t> vfile;
  std::vector<uint8_t> lds;
  std::vector<LdsMeta> lmeta;  // per dword
  uint32_t lds_size = 0;
  uint32_t epoch = 0;
  uint32_t wg[3] = {0, 0, 0};
  int nwaves = 0;
  uint32_t priv_size = 0;
  bool tracing = false;  // timing hook: this workgroup is recorded

  std::vector<uint32_t> lds_wpc;  // per LDS dword: instruction index of the last write (hazard messages)
  // the launch's kernarg segment, dispatch packet and queue (owned by the primary Ctx, shared by the
  // per-thread copies that run workgroups in parallel)
  const uint8_t* kernarg_p = nullptr; size_t kernarg_n = 0;
  uint8_t* packet_p = nullptr; uint8_t* queue_p = nullptr;
  uint64_t memtime = 0;  // s_memtime / s_memrealtime counter
  uint64_t cur_wg = 0;  // linear index of the workgroup running (first hazard report per site)
  bool warn = false;              // report-only hazard mode
  std::map<std::pair<int, int>, HazardSite> hazard_sites;  // (instruction index, check) -> first report
  // lane checker (check_lanes): see "lane checker" below
  bool lc = false, lc_warn = false;
  std::map<std::pair<int, int>, HazardSite> lane_sites;
  std::vector<std::string> lane_origins;       // why some lanes are undefined (messages)
  std::map<std::pair<int, int>, int32_t> origin_at;  // (instruction index, row) -> index in lane_origins
  std::vector<int32_t> lds_orig;               // per LDS dword: origin of an undefined value stored there, -1 defined
  uint64_t lane_ds_undef = 0, lane_st_def = ~0ull;  // exec_ds <-> lane_post: lanes loaded undefined / storing defined data
  int32_t lane_ds_orig = -1, lane_st_orig = -1;
  uint64_t mfma_partial = 0;

  Ctx(Module::Impl& m, const CodeObject& c, const KernelDesc& k, const LaunchParams& p)
      : M(m), co(c), kd(k), P(p), gfx950(c.gfx950), hz(p.check_hazards), warn(p.hazards_warn),
        lc(p.check_lanes), lc_warn(p.lanes_warn) {}

  // A hazard: an error, or in report-only mode one record per (site, check) and execution goes on.
  enum { HZ_REG_READ, HZ_REG_WRITE, HZ_LDS_PENDING, HZ_LDS_RACE, HZ_LDS_WAR };
  void hazard(Wave& w, int check, std::string msg) {
    if (!warn) throw HazardError(msg);
    HazardSite& h = hazard_sites[{w.pc, check}];
    if (!h.count) { h.message = std::move(msg); h.wg = cur_wg; }
    h.count++;
  }
  std::string inst_at(uint32_t idx) {
    if (idx >= M.insts.size()) return "?";
    const Inst& in = M.insts[idx];
    std::ostringstream os;
    os << "pc 0x" << std::hex << in.pc << std::dec << " `" << (in.key == KEY_INVALID ? std::string("<invalid>") : disasm_inst(in)) << "`";
    return os.str();
  }
  // Direct-to-LDS loads land in LDS when they retire (s_waitcnt vmcnt, or the wave's end), not at issue:
  // the latest moment the ISA allows, and what hardware shows when another wave still reads the old
  // contents of the buffer a load is refilling (the load's latency orders them there).
  void land_dma(Wave& w) {
    if (w.dma.empty()) return;
    size_t i = 0;
    for (; i < w.dma.size() && w.dma[i].seq <= w.vm_done; i++) {
      std::memcpy(lds.data() + w.dma[i].la, w.dma[i].data, w.dma[i].n);
      if (lc) lane_lds_store(w.dma[i].la, (int)w.dma[i].n, true, -1);  // memory data is defined
    }
    if (i) w.dma.erase(w.dma.begin(), w.dma.begin() + (std::ptrdiff_t)i);
  }
  void defer_dma(Wave& w, uint64_t seq, uint32_t la, const void* src, uint32_t n) {
    DmaWrite d; d.seq = seq; d.la = la; d.n = n; std::memcpy(d.data, src, n);
    w.dma.push_back(d);
  }

  uint64_t co_base() const { return reinterpret_cast<uint64_t>(co.loaded.data()); }

  // ---------------------------------------------------------------- errors
  std::string where(const Wave& w) {
    const Inst& in = M.insts[w.pc];
    std::ostringstream os;
    os << "kernel '" << kd.name << "', pc 0x" << std::hex << in.pc << std::dec << " (+0x" << std::hex
       << (in.pc - kd.entry_vaddr) << std::dec << " from entry), workgroup (" << wg[0] << "," << wg[1] << "," << wg[2]
       << ") wave " << w.id << ": `" << (in.key == KEY_INVALID ? std::string("<invalid>") : disasm_inst(in)) << "`";
    return os.str();
  }
  [[noreturn]] void unsupported(Wave& w, const std::string& what) {
    throw UnsupportedInstruction(where(w) + ": " + what);
  }
  std::string nearest(uint64_t a) {
    const Region* best = nullptr; uint64_t bd = ~0ull;
    for (auto& r : regions) {
      uint64_t d = a < r.base ? r.base - a : (a >= r.base + r.size ? a - (r.base + r.size) + 1 : 0);
      if (d < bd) { bd = d; best = &r; }
    }
    if (!best) return "no buffers registered";
    std::ostringstream os;
    os << "nearest buffer: " << best->name << " [0x" << std::hex << best->base << ", 0x" << best->base + best->size << ")";
    if (a >= best->base + best->size) os << std::dec << ", " << (a - (best->base + best->size)) << " bytes past its end";
    else if (a < best->base) os << std::dec << ", " << (best->base - a) << " bytes before its start";
    return os.str();
  }
  [[noreturn]] void violation(Wave& w, uint64_t addr, int size, bool store, int lane, const char* space = "global") {
    std::ostringstream os;
    os << "out-of-bounds " << space << (store ? " store" : " load") << " of " << size << " bytes at address 0x" << std::hex
       << addr << std::dec << " (lane " << lane << ") in " << where(w);
    if (std::string(space) == "global") os << "; " << nearest(addr);
    throw MemoryViolation(os.str());
  }

  // ---------------------------------------------------------------- global memory
  const Region* find_region(uint64_t a, uint64_t n) {
    // regions sorted by base; find last with base <= a
    size_t lo = 0, hi = regions.size();
    while (lo < hi) { size_t mid = (lo + hi) / 2; if (regions[mid].base <= a) lo = mid + 1; else hi = mid; }
    for (size_t i = lo; i-- > 0;) {
      const Region& r = regions[i];
      if (a >= r.base && a + n <= r.base + r.size) return &r;
      if (i + 8 < lo) break;
    }
    return nullptr;
  }
  const Region* last_region = nullptr;
  // byte counters: bytes each lane's access requests (VMEM loads / stores incl. atomics, SMEM, LDS
  // reads / writes by DS instructions) and the distinct 64-byte global lines VMEM accesses touch
  uint64_t b_vm_ld = 0, b_vm_st = 0, b_sm = 0, b_lds_rd = 0, b_lds_wr = 0;
  std::unordered_set<uint64_t> lines;
  uint64_t last_line = ~0ull;
  inline void touch(uint64_t a, int n, bool store) {
    (store ? b_vm_st : b_vm_ld) += (uint64_t)n;
    for (uint64_t ln = a >> 6, e = (a + (uint64_t)n - 1) >> 6; ln <= e; ln++)
      if (ln != last_line) { lines.insert(ln); last_line = ln; }
  }
  inline uint8_t* gptr(Wave& w, uint64_t a, int n, bool store, int lane) {
    if (lane >= 0) touch(a, n, store); else b_sm += (uint64_t)n;  // lane -1: scalar loads
    const Region* l = last_region;
    if (l && a >= l->base && a + n <= l->base + l->size && (l->writable || !store)) return reinterpret_cast<uint8_t*>(a);
    const Region* r = find_region(a, (uint64_t)n);
    last_region = r;
    if (!r || (store && !r->writable)) violation(w, a, n, store, lane);
    return reinterpret_cast<uint8_t*>(a);
  }

  // ---------------------------------------------------------------- operands
  uint32_t sspecial(Wave& w, uint16_t c) {
    switch (c) {
      case 251: return w.vcc() == 0;
      case 252: return w.exec() == 0;
      case 253: return w.scc;
      case 235: return (uint32_t)(kSharedAperture >> 32);
      case 236: return (uint32_t)(kSharedAperture >> 32) + 1;
      case 237: return (uint32_t)(kPrivateAperture >> 32);
      case 238: return (uint32_t)(kPrivateAperture >> 32) + 1;
      case 125: return 0;
    }
    unsupported(w, "unsupported scalar operand code " + std::to_string(c));
  }
  inline uint32_t sv(Wave& w, const Inst& in, int i) {
    uint16_t c = in.src[i];
    if (in.is_const[i]) return (uint32_t)in.cval[i];
    if (c < 128) return w.s[c];
    return sspecial(w, c);
  }
  inline uint64_t sv64(Wave& w, const Inst& in, int i) {
    uint16_t c = in.src[i];
    if (in.is_const[i]) return in.cval[i];
    if (c < 127) return mk64(w.s[c], w.s[c + 1]);
    return sspecial64(w, c);
  }
  // 64-bit view of a special source: the aperture registers are 64-bit bases (low dword 0); as a
  // 32-bit operand they read as their high dword.
  uint64_t sspecial64(Wave& w, uint16_t c) {
    if (c >= 235 && c <= 238) return (uint64_t)sspecial(w, c) << 32;
    return sspecial(w, c);
  }
  inline void sw(Wave& w, uint16_t c, uint32_t v) { if (c < 128 && c != 125) w.s[c] = v; }
  inline void sw64(Wave& w, uint16_t c, uint64_t v) { if (c < 127) { w.s[c] = (uint32_t)v; w.s[c + 1] = (uint32_t)(v >> 32); } }

  // VALU source (half 0 = low dword, 1 = high dword of a 64-bit operand)
  // Every VALU source is presented as 64 lanes: VGPR rows directly, scalars broadcast into a per-wave
  // buffer (so the lane loops are unit-stride and vectorise).
  inline SR vs(Wave& w, const Inst& in, int i, int half = 0) {
    uint16_t c = in.src[i];
    if (c >= OPC_VGPR && c != OPC_NONE) return SR{w.row((uint16_t)(c + half)), 63};
    uint32_t v;
    if (in.is_const[i]) v = reinterpret_cast<const uint32_t*>(&in.cval[i])[half];
    else if (c < 128) v = w.s[c + half];
    else if (in.nbits[i] == 64) v = (uint32_t)(sspecial64(w, c) >> (32 * half));
    else v = half ? 0 : sspecial(w, c);
    uint32_t* b = w.bc[i][half];
    for (int l = 0; l < 64; l++) b[l] = v;
    return SR{b, 63};
  }

  // ---------------------------------------------------------------- hazard checks
  // LDS bookkeeping keeps 30-bit sequence numbers: compare modulo 2^30 (outstanding distance < 2^29).
  // ep = ~0u: the wave's current state; else its state when it arrived at the barrier ending interval ep.
  bool retired30(const Wave& w, uint8_t kind, uint32_t seq30, uint32_t ep) const {
    uint64_t done;
    if (ep != ~0u) {
      const std::vector<uint64_t>& h = kind == TK_VM ? w.vm_bar : w.ds_bar;
      done = (ep < h.size() && h[ep] != ~0ull) ? h[ep] : (kind == TK_VM ? w.vm_done : w.ds_done);
    } else done = kind == TK_VM ? w.vm_done : kind == TK_DS ? w.ds_done : w.sm_done;
    return ((uint32_t)(done - seq30) & 0x3fffffffu) < 0x20000000u;
  }
  // Was the op retired by the time wave w arrived at the s_barrier that ended barrier interval `ep`?
  bool retired_at_barrier(const Wave& w, uint8_t kind, uint64_t seq, uint32_t ep) const {
    const std::vector<uint64_t>& h = kind == TK_VM ? w.vm_bar : w.ds_bar;
    if (ep < h.size() && h[ep] != ~0ull) return seq <= h[ep];
    return retired(w, kind, seq);  // the wave ended without that barrier: its final state
  }
  bool retired(const Wave& w, uint8_t kind, uint64_t seq) const {
    switch (kind) {
      case TK_VM: return seq <= w.vm_done;
      case TK_DS: return seq <= w.ds_done;
      case TK_SM: return seq <= w.sm_done;
    }
    return true;
  }
  static std::string tag_name(int t) {
    if (t < 128) return "s" + std::to_string(t);
    if (t < 384) return "v" + std::to_string(t - 128);
    return "a" + std::to_string(t - 384);
  }
  static const char* kind_name(int k) { return k == TK_VM ? "vector memory (vmcnt)" : k == TK_DS ? "LDS (lgkmcnt)" : "scalar memory (lgkmcnt)"; }
  void hazard_regs(Wave& w, const XInst& x, bool is_load) {
    for (int i = 0; i < x.nrd; i++) {
      const RegRange& r = x.rd[i];
      for (int t = r.base; t < r.base + r.n && t < 640; t++) {
        if (!w.tkind[t]) continue;
        if (retired(w, w.tkind[t], w.tseq[t])) { w.tkind[t] = 0; continue; }
        hazard(w, HZ_REG_READ, "read of " + tag_name(t) + " before the s_waitcnt that retires the outstanding " +
                                   kind_name(w.tkind[t]) + " load writing it, in " + where(w));
        w.tkind[t] = 0;  // (warn mode) reported: go on
      }
    }
    for (int i = 0; i < x.nwr; i++) {
      const RegRange& r = x.wr[i];
      for (int t = r.base; t < r.base + r.n && t < 640; t++) {
        if (!w.tkind[t]) continue;
        if (retired(w, w.tkind[t], w.tseq[t])) { w.tkind[t] = 0; continue; }
        if (is_load) continue;  // a newer load of the same register: tag replaced below
        hazard(w, HZ_REG_WRITE, "write of " + tag_name(t) + " while an outstanding " + kind_name(w.tkind[t]) +
                                    " load still targets it (missing s_waitcnt), in " + where(w));
        w.tkind[t] = 0;
      }
    }
  }
  void tag_dst(Wave& w, uint16_t code, int nregs, uint8_t kind, uint64_t seq) {
    if (!hz) return;
    int t = tag_index(code);
    if (t < 0) return;
    for (int i = 0; i < nregs && t + i < 640; i++) { w.tkind[t + i] = kind; w.tseq[t + i] = seq; }
  }

  // ---------------------------------------------------------------- LDS
  inline void lds_check(Wave& w, uint32_t a, int n, bool store, int lane) {
    if ((uint64_t)a + n > lds_size) violation(w, a, n, store, lane, "LDS");
  }
  [[gnu::cold, gnu::noinline]] void lds_pending_error(Wave& w, uint32_t d, bool store, const LdsMeta& m, bool self) {
    hazard(w, HZ_LDS_PENDING, std::string("LDS ") + (store ? "write" : "read") + " of byte 0x" + hex(d * 4) +
                                  " before the s_waitcnt retiring the " + (m.wkind == TK_VM ? "direct-to-LDS load" : "LDS write") +
                                  " of wave " + std::to_string(m.writer - 1) + " that writes it (" + inst_at(lds_wpc[d]) + ")" +
                                  (self ? std::string() : "; it must retire before a s_barrier that precedes this access") +
                                  ", in " + where(w));
  }
  [[gnu::cold, gnu::noinline]] void lds_race_error(Wave& w, uint32_t d, bool store, const LdsMeta& m, bool war) {
    if (!war)
      hazard(w, HZ_LDS_RACE, std::string("LDS race: ") + (store ? "write" : "read") + " of byte 0x" + hex(d * 4) + " by wave " +
                                 std::to_string(w.id) + ", written by wave " + std::to_string(m.writer - 1) + " (" +
                                 inst_at(lds_wpc[d]) + ") with no s_barrier in between, in " + where(w));
    else
      hazard(w, HZ_LDS_WAR, "LDS race: write of byte 0x" + hex(d * 4) + " by wave " + std::to_string(w.id) +
                                ", read by " + (m.reader == 0xffff ? std::string("other waves") : "wave " + std::to_string(m.reader - 1)) +
                                " with no s_barrier in between, in " + where(w));
  }
  // Per-dword LDS bookkeeping for the hazard checker (pending writes, races). Hot: the common cases
  // (own data, nothing pending) take a few compares; error reporting is out of line.
  inline void lds_track(Wave& w, uint32_t a, int n, bool store, uint8_t kind, uint64_t seq) {
    if (!hz) return;
    const uint16_t me = (uint16_t)(w.id + 1);
    const uint32_t ep = epoch;
    for (uint32_t d = a >> 2, e = (a + n - 1) >> 2; d <= e; d++) {
      LdsMeta& m = lmeta[d];
      if (m.wkind) {
        const Wave& ww = waves[m.writer - 1];
        bool self = m.writer == me;
        bool done;
        if (self) done = retired30(ww, m.wkind, m.wseq, ~0u);
        // Another wave's write from an earlier interval: it counts as visible if the writer retired it
        // before ANY barrier preceding this access, i.e. by the barrier that opened this interval (the
        // done counters only grow, so that barrier is the latest and the weakest requirement).
        else if (m.wepoch < ep) done = retired30(ww, m.wkind, m.wseq, ep - 1);
        else done = true;  // same barrier interval, another wave: reported as a race below
        if (!done && (m.wkind == TK_VM || !self)) { lds_pending_error(w, d, store, m, self); done = true; }
        if (done && (self || m.wepoch < ep)) m.wkind = 0;
      }
      if (m.wepoch == ep && m.writer != me && m.writer) lds_race_error(w, d, store, m, false);
      if (store) {
        if (m.repoch == ep && m.reader != me && m.reader) lds_race_error(w, d, store, m, true);
        m.writer = me; m.wepoch = ep; m.wkind = kind; m.wseq = (uint32_t)seq & 0x3fffffffu;
        lds_wpc[d] = (uint32_t)w.pc;
      } else if (m.repoch != ep || !m.reader) {
        m.reader = me; m.repoch = ep;
      } else if (m.reader != me) {
        m.reader = 0xffff;
      }
    }
  }
  static std::string hex(uint64_t v) { char b[32]; snprintf(b, sizeof b, "%llx", (unsigned long long)v); return b; }

  // ---------------------------------------------------------------- lane checker (check_lanes)
  // Hardware leaves a VGPR lane as it was when a VALU op or load writes the register under an EXEC that
  // excludes the lane, and registers start undefined; an MFMA reads all 64 lanes of its operands
  // whatever EXEC is. The checker keeps per row (VGPR/AGPR) the lanes holding a defined value (ldef,
  // propagated lane by lane from the sources) and the lanes of the row's last write (llw). At an MFMA
  // the suspect lanes of each operand row are its undefined ones and, when the MFMA runs under a partial
  // EXEC, the inactive lanes its last write did not cover (stale: they hold an older value, e.g. an
  // operand recomputed after the compiler sank the MFMA into a lane-divergent branch). The MFMA runs a
  // second and third time with those lanes replaced by two bit patterns; D lanes that change are
  // undefined. Undefined lanes are reported where they become observable: a store to global memory of an
  // active lane (LDS keeps a per-dword shadow, so staging through LDS is followed). Lanes that are
  // computed but never stored (masked rows of a tail tile) are therefore not findings.
  enum { LC_STORE };
  void lane_finding(Wave& w, int check, std::string msg) {
    if (!lc_warn) throw LaneError(msg);
    HazardSite& h = lane_sites[{w.pc, check}];
    if (!h.count) { h.message = std::move(msg); h.wg = cur_wg; }
    h.count++;
  }
  static int lane_row(uint16_t code) {  // VGPR/AGPR operand code -> row 0..511, else -1
    if (code == OPC_NONE || code < OPC_VGPR || code >= OPC_AGPR + 256) return -1;
    return code - OPC_VGPR;
  }
  static std::string row_name(int r) { return (r < 256 ? "v" : "a") + std::to_string(r & 255); }
  static std::string lanes_hex(uint64_t m) { return "0x" + hex(m); }
  int32_t lane_origin(int row, const std::string& text) {
    auto key = std::make_pair(w_pc_for_origin, row);
    auto it = origin_at.find(key);
    if (it != origin_at.end()) return it->second;
    lane_origins.push_back(text);
    return origin_at[key] = (int32_t)lane_origins.size() - 1;
  }
  int w_pc_for_origin = 0;
  std::string origin_text(int32_t o) const { return o >= 0 && (size_t)o < lane_origins.size() ? lane_origins[o] : "?"; }
  // Undefined lanes `bad` of row r read at the current instruction: their origin (made here if r never held one).
  int32_t read_origin(Wave& w, int r, uint64_t bad) {
    if (w.lorig[r] >= 0) return w.lorig[r];
    w_pc_for_origin = w.pc;
    return lane_origin(r, "lanes " + lanes_hex(bad) + " of " + row_name(r) + " were never written before " + inst_at((uint32_t)w.pc) +
                              " read them (registers are undefined when a wave starts)");
  }
  void lane_init(Wave& w, uint64_t e) {
    std::memset(w.ldef, 0, sizeof w.ldef); std::memset(w.llw, 0, sizeof w.llw);
    std::fill(w.lwpc, w.lwpc + 512, -1); std::fill(w.lorig, w.lorig + 512, -1);
    w.ldef[0] = w.llw[0] = e;  // v0: the work-item ids of the lanes that hold work-items
  }
  // An LDS write of n bytes at a whose data is defined or not (origin o).
  void lane_lds_store(uint32_t a, int n, bool defined, int32_t o) {
    for (uint32_t d = a >> 2, e = (a + n - 1) >> 2; d <= e && d < lds_orig.size(); d++) lds_orig[d] = defined ? -1 : o;
  }
  void lane_lds_load(uint32_t a, int n, int lane) {
    for (uint32_t d = a >> 2, e = (a + n - 1) >> 2; d <= e && d < lds_orig.size(); d++)
      if (lds_orig[d] >= 0) { lane_ds_undef |= 1ull << lane; if (lane_ds_orig < 0) lane_ds_orig = lds_orig[d]; }
  }
  // Definedness of `nregs` rows from `code` over the lanes in `care` (others count as defined); the origin
  // of the first undefined one goes to *o.
  uint64_t rows_def(Wave& w, uint16_t code, int nregs, uint64_t care, int32_t* o) {
    int r = lane_row(code);
    if (r < 0) return ~0ull;
    uint64_t d = ~0ull;
    for (int i = 0; i < nregs && r + i < 512; i++) {
      uint64_t di = w.ldef[r + i];
      if ((care & ~di) && *o < 0) *o = read_origin(w, r + i, care & ~di);
      d &= di;
    }
    return d;
  }
  void write_rows(Wave& w, uint16_t code, int nregs, uint64_t e, uint64_t def, int32_t o) {
    int r = lane_row(code);
    if (r < 0) return;
    for (int i = 0; i < nregs && r + i < 512; i++) {
      w.ldef[r + i] = (w.ldef[r + i] & ~e) | (e & def);
      w.llw[r + i] = e; w.lwpc[r + i] = w.pc;
      if (e & ~def) w.lorig[r + i] = o;
      else if (!~w.ldef[r + i]) w.lorig[r + i] = -1;
    }
  }
  static int nregs_of(int bits) { return bits <= 32 ? 1 : (bits + 31) / 32; }
  static bool is_low_determined(const Inst& in) {
    const std::string& n = in.row->name;
    return starts(n, "v_mad_u64_u32") || starts(n, "v_mad_i64_i32") || starts(n, "v_lshl_add_u64") ||
           starts(n, "v_lshlrev_b64") || starts(n, "v_mov_b64");
  }
  // before the instruction: a global store of undefined lanes is a finding
  void lane_pre(Wave& w, const Inst& in, const XInst& x, uint64_t e) {
    if (in.enc != ENC_FLAT && in.enc != ENC_GLOBAL && in.enc != ENC_MUBUF) return;  // scratch: spills are fine
    if (!x.mop_ok || !(x.mop.store || x.mop.atomic >= 0) || in.lds) return;
    int32_t o = -1;
    uint64_t d = rows_def(w, in.src[1], nregs_of(in.nbits[1]), e, &o);
    uint64_t bad = e & ~d;
    if (!bad) return;
    lane_finding(w, LC_STORE, "store of undefined lanes " + lanes_hex(bad) + " of " + row_name(lane_row(in.src[1])) +
                                  (nregs_of(in.nbits[1]) > 1 ? "..+" + std::to_string(nregs_of(in.nbits[1]) - 1) : std::string()) +
                                  " (their values depend on register lanes the program never defined: undefined at wave start, or stale, i.e. "
                                  "left from an older value because they were inactive when the register was last written): " + origin_text(o) + "; in " + where(w));
  }
  // after the instruction (EXEC e as it executed): definedness of the rows it wrote
  void lane_post(Wave& w, const Inst& in, const XInst& x, uint64_t e) {
    switch (in.enc) {
      case ENC_VOP1: case ENC_VOP2: case ENC_VOPC: case ENC_VOP3: case ENC_VOP3P: break;
      case ENC_DS: lane_post_ds(w, in, x, e); return;
      case ENC_FLAT: case ENC_GLOBAL: case ENC_SCRATCH: case ENC_MUBUF:
        for (int i = 0; i < x.nwr; i++) if (x.wr[i].base >= 128) write_rows(w, (uint16_t)(OPC_VGPR + x.wr[i].base - 128), x.wr[i].n, e, ~0ull, -1);
        return;
      default: return;  // scalar, MFMA (lane_mfma)
    }
    if (x.is_mfma) return;
    const bool valu = in.enc != ENC_VOP3P;
    const int op = valu ? (int)in.key - ENC_VOP3 * 1024 : in.op;  // VALU: VOP3 opcode space
    if (valu && op == 650) {  // v_writelane_b32: one lane, whatever EXEC is (its data is an SGPR / constant)
      int r = lane_row(in.dst);
      if (r >= 0) { uint32_t l = (in.src[1] < 128 ? w.s[in.src[1]] : (uint32_t)in.cval[1]) & 63; w.ldef[r] |= 1ull << l; }
      return;
    }
    if (valu && (op == 401 || op == 409 || op == 410)) {  // v_swap_b32, v_permlane{16,32}_swap: both rows written
      int a = lane_row(in.dst), b = lane_row(in.src[0]);
      if (a < 0 || b < 0) return;
      uint64_t da = w.ldef[a], db = w.ldef[b];
      if (op == 401) { w.ldef[a] = (da & ~e) | (db & e); w.ldef[b] = (db & ~e) | (da & e); }
      else if (op == 410) { w.ldef[a] = (da & 0xffffffffull) | (db << 32); w.ldef[b] = (db & ~0xffffffffull) | (da >> 32); }
      else {
        const uint64_t hi = 0xffff0000ffff0000ull, lo = ~hi;
        w.ldef[a] = (da & lo) | ((db & lo) << 16); w.ldef[b] = (db & hi) | ((da & hi) >> 16);
      }
      std::swap(w.lorig[a], w.lorig[b]);
      if (w.lorig[a] < 0 && ~w.ldef[a]) w.lorig[a] = w.lorig[b];
      if (w.lorig[b] < 0 && ~w.ldef[b]) w.lorig[b] = w.lorig[a];
      w.llw[a] = w.llw[b] = e; w.lwpc[a] = w.lwpc[b] = w.pc;
      return;
    }
    if (in.dst == OPC_NONE || lane_row(in.dst) < 0) return;  // VOPC, readlane: an SGPR destination
    int32_t o = -1;
    if (!valu && op >= 48 && op <= 51) {  // v_pk_{fma,mul,add}_f32, v_pk_mov_b32: each dword from selected source dwords
      uint64_t dw[2] = {~0ull, ~0ull};
      for (int h = 0; h < 2; h++) {
        const uint8_t sel = h ? in.opsel_hi : in.opsel;
        for (int i = 0; i < 3; i++) {
          if (op == 51 && i != h) continue;  // v_pk_mov_b32: D.lo from src0, D.hi from src1
          int r = lane_row(in.src[i]);
          if (r < 0) continue;
          dw[h] &= rows_def(w, (uint16_t)(in.src[i] + (sel >> i & 1)), 1, e, &o);
        }
      }
      write_rows(w, in.dst, 1, e, dw[0], o);
      write_rows(w, (uint16_t)(in.dst + 1), 1, e, dw[1], o);
      return;
    }
    if (valu && in.dst_bits > 32 && is_low_determined(in)) {
      // 64-bit integer add / multiply-add / left shift: a result dword depends only on the source dwords at
      // or below it (LLVM uses v_mad_u64_u32 with an undefined high addend when only the low dword is used)
      const int nd = nregs_of(in.dst_bits);
      for (int k = 0; k < nd; k++) {
        uint64_t dk = ~0ull;
        for (int i = 0; i < 3; i++) {
          if (lane_row(in.src[i]) < 0) continue;
          dk &= rows_def(w, in.src[i], std::min(k + 1, nregs_of(in.nbits[i] ? in.nbits[i] : 32)), e, &o);
        }
        write_rows(w, (uint16_t)(in.dst + k), 1, e, dk, o);
      }
      return;
    }
    uint64_t d;
    if (valu && op == 256 && in.ext == 0) {  // v_cndmask_b32: only the selected source matters
      uint64_t sel = in.src[2] < 128 ? mk64(w.s[in.src[2]], w.s[in.src[2] + 1]) : 0;
      uint64_t d0 = rows_def(w, in.src[0], 1, e & ~sel, &o), d1 = rows_def(w, in.src[1], 1, e & sel, &o);
      d = (d0 & ~sel) | (d1 & sel);
    } else {
      d = ~0ull;
      for (int i = 0; i < 3; i++) {
        if (lane_row(in.src[i]) < 0) continue;
        int nr = nregs_of(in.nbits[i] ? in.nbits[i] : 32);
        if (i == 0 && in.ext == 1) {  // DPP: lanes read other lanes of their row (or of the wave)
          uint64_t di = rows_def(w, in.src[0], nr, 0, &o) | ~e;  // disabled source lanes are not read
          const unsigned c = in.dpp_ctrl;
          bool row_local = c < 0x130 || c == 0x140 || c == 0x141 || (c >= 0x150 && c <= 0x15f);
          uint64_t col = 0;
          if (row_local) { for (int rr = 0; rr < 4; rr++) if (((di >> (16 * rr)) & 0xffff) == 0xffff) col |= 0xffffull << (16 * rr); }
          else col = ~di ? 0 : ~0ull;
          if ((e & ~col) && o < 0) rows_def(w, in.src[0], nr, ~di, &o);  // origin of the undefined source lanes
          d &= col;
        } else d &= rows_def(w, in.src[i], nr, e, &o);
      }
    }
    write_rows(w, in.dst, nregs_of(in.dst_bits ? in.dst_bits : 32), e, d, o);
  }
  void lane_post_ds(Wave& w, const Inst& in, const XInst& x, uint64_t e) {
    const int op = in.op;
    if (in.dst == OPC_NONE || lane_row(in.dst) < 0) return;
    int n = 0;
    for (int i = 0; i < x.nwr; i++) if (x.wr[i].base >= 128) n = x.wr[i].n;
    if (!n) return;
    uint64_t d; int32_t o = -1;
    if (op == 61 || op == 62 || op == 63) {  // swizzle / permute / bpermute: lanes read other lanes
      uint64_t dd = rows_def(w, op == 61 ? in.src[0] : in.src[1], 1, 0, &o) | ~e;
      d = ~dd ? 0 : ~0ull;
      if (~dd) o = read_origin(w, lane_row(op == 61 ? in.src[0] : in.src[1]), ~dd);
    } else if (op >= 224 && op <= 227) {  // transposing reads mix the lanes of a 16-lane group
      d = ~0ull;
      for (int g = 0; g < 4; g++) if ((lane_ds_undef >> (16 * g)) & 0xffff) d &= ~(0xffffull << (16 * g));
      o = lane_ds_orig;
    } else { d = ~lane_ds_undef; o = lane_ds_orig; }
    write_rows(w, in.dst, n, e, d, o);
  }
  // An MFMA: suspect lanes of every operand row, the poisoned runs, the definedness of D.
  void lane_mfma(Wave& w, const Inst& in, const XInst& x) {
    const uint64_t e = w.exec();
    if (!x.mfma) { exec_mfma(w, in, x); return; }
    const MfmaInfo& mi = *x.mfma;
    const int nreg[5] = {mfma_a_regs(mi, in.cbsz), mfma_b_regs(mi, in.blgp), mi.cd_regs, 1, 1};
    const uint16_t code[5] = {in.src[0], in.src[1], in.src[2], in.enc == ENC_VOP3PX2 ? in.scale_src[0] : (uint16_t)OPC_NONE,
                              in.enc == ENC_VOP3PX2 ? in.scale_src[1] : (uint16_t)OPC_NONE};
    std::memset(lane_sus, 0, sizeof lane_sus);
    bool any = false;
    for (int k = 0; k < 5; k++) {
      int r = lane_row(code[k]);
      if (r < 0) continue;
      for (int i = 0; i < nreg[k] && r + i < 512; i++) {
        uint64_t s = ~w.ldef[r + i] | (~e & ~w.llw[r + i]);
        lane_sus[r + i] = s;
        any |= s != 0;
      }
    }
    const int dr = lane_row(in.dst), nd = mi.cd_regs;
    if (!any) {
      exec_mfma(w, in, x);
      if (dr >= 0) write_rows(w, in.dst, nd, ~0ull, ~0ull, -1);
      return;
    }
    static thread_local std::vector<uint32_t> p1, p2;
    p1.assign((size_t)nd * 64, 0); p2.assign((size_t)nd * 64, 0);
    exec_mfma(w, in, x, lane_sus, 0xffffffffu, p1.data());
    exec_mfma(w, in, x, lane_sus, 0x3c5a5a3cu, p2.data());
    exec_mfma(w, in, x);
    if (dr < 0) return;
    const uint32_t* D = w.row(in.dst);
    uint64_t taint[32] = {0}, all = 0;
    for (int i = 0; i < nd && i < 32; i++)
      for (int l = 0; l < 64; l++)
        if (p1[i * 64 + l] != D[i * 64 + l] || p2[i * 64 + l] != D[i * 64 + l]) taint[i] |= 1ull << l;
    for (int i = 0; i < nd && i < 32; i++) all |= taint[i];
    int32_t o = -1;
    if (all) {
      std::string why;
      int listed = 0;
      for (int k = 0; k < 5 && listed < 3; k++) {
        int r = lane_row(code[k]);
        if (r < 0) continue;
        for (int i = 0; i < nreg[k] && r + i < 512 && listed < 3; i++) {
          int rr = r + i;
          uint64_t und = ~w.ldef[rr], stale = ~e & ~w.llw[rr] & w.ldef[rr];
          if (!und && !stale) continue;
          listed++;
          why += why.empty() ? "" : "; ";
          if (stale)
            why += "lanes " + lanes_hex(stale) + " of " + row_name(rr) + " are stale: its last write (" +
                   (w.lwpc[rr] >= 0 ? inst_at((uint32_t)w.lwpc[rr]) : std::string("none")) + ") ran under EXEC " + lanes_hex(w.llw[rr]) +
                   " and this MFMA runs under EXEC " + lanes_hex(e) + " (an MFMA reads all 64 lanes whatever EXEC is)";
          if (und)
            why += std::string(stale ? "; " : "") + "lanes " + lanes_hex(und) + " of " + row_name(rr) + " are undefined (" +
                   (w.lorig[rr] >= 0 ? origin_text(w.lorig[rr]) : std::string("never written")) + ")";
        }
      }
      if (why.size() > 1500) why = why.substr(0, 1500) + "...";
      w_pc_for_origin = w.pc;
      o = lane_origin(-1, "the MFMA at " + inst_at((uint32_t)w.pc) + " read suspect operand lanes: " + why);
    }
    for (int i = 0; i < nd && dr + i < 512; i++) {
      w.ldef[dr + i] = ~taint[i < 32 ? i : 31]; w.llw[dr + i] = ~0ull; w.lwpc[dr + i] = w.pc;
      w.lorig[dr + i] = taint[i < 32 ? i : 31] ? o : -1;
    }
  }
  uint64_t lane_sus[512];

  // ---------------------------------------------------------------- run
  void init_wave(Wave& w, int wid, uint32_t nthreads);
  void run_wave(Wave& w, uint32_t quantum);
  void step(Wave& w);
  bool step_gpr_indexed(Wave& w);
  void run_workgroup(uint64_t linear, uint64_t nthreads);
  void merge_from(const Ctx& o);
  void exec_salu(Wave& w, const Inst& in, int& next);
  void exec_smem(Wave& w, const Inst& in);
  void exec_valu(Wave& w, const Inst& in, const XInst& x);
  void exec_vop3p(Wave& w, const Inst& in, const XInst& x);
  bool exec_scalef32(Wave& w, const Inst& in, int op, uint64_t m);
  void exec_ds(Wave& w, const Inst& in);
  void exec_flat(Wave& w, const Inst& in);
  void exec_mubuf(Wave& w, const Inst& in);
  // sus/poison/dout: the lane checker's poisoned run (suspect lanes per row set to `poison`, D to dout)
  void exec_mfma(Wave& w, const Inst& in, const XInst& x, const uint64_t* sus = nullptr, uint32_t poison = 0,
                 uint32_t* dout = nullptr);
  uint32_t getreg(Wave& w, int id);
  void setreg(Wave& w, int id, int off, int size, uint32_t v);
};

// ============================================================================ wave init (AMDGPU ABI)
void Ctx::init_wave(Wave& w, int wid, uint32_t nthreads) {
  std::memset(w.s, 0, sizeof w.s);
  w.scc = false; w.pc = M.idx_of(kd.entry_vaddr); w.state = WS_RUN; w.id = wid;
  w.vm_issued = w.vm_done = w.ds_issued = w.ds_done = w.sm_issued = w.sm_done = 0;
  std::memset(w.tkind, 0, sizeof w.tkind);
  w.vm_bar.clear(); w.ds_bar.clear();
  w.since_barrier = 0;
  int sg = 0;
  auto put64 = [&](uint64_t v) { w.s[sg] = (uint32_t)v; w.s[sg + 1] = (uint32_t)(v >> 32); sg += 2; };
  if (kd.kp_private_segment_buffer) { sg += 4; }  // not supported on architected-flat-scratch targets
  if (kd.kp_dispatch_ptr) put64(reinterpret_cast<uint64_t>(packet_p));
  if (kd.kp_queue_ptr) put64(reinterpret_cast<uint64_t>(queue_p));
  if (kd.kp_kernarg_segment_ptr) put64(reinterpret_cast<uint64_t>(kernarg_p));
  if (kd.kp_dispatch_id) put64(0);
  if (kd.kp_flat_scratch_init) put64(0);
  if (kd.kp_private_segment_size) w.s[sg++] = kd.private_segment_fixed_size;
  for (int i = 0; i < kd.kernarg_preload_length && sg < 16; i++) {
    uint32_t off = (kd.kernarg_preload_offset + i) * 4, v = 0;
    if (off + 4 <= kernarg_n) std::memcpy(&v, kernarg_p + off, 4);
    w.s[sg++] = v;
  }
  sg = std::max(sg, kd.user_sgpr_count);  // system SGPRs follow the user SGPRs
  if (kd.wg_id_x) w.s[sg++] = wg[0];
  if (kd.wg_id_y) w.s[sg++] = wg[1];
  if (kd.wg_id_z) w.s[sg++] = wg[2];
  if (kd.wg_info) w.s[sg++] = 0;
  // (no private-segment wave offset SGPR: gfx942/gfx950 use architected flat scratch)
  uint32_t first = (uint32_t)wid * 64;
  uint64_t ex = 0;
  uint32_t* v0 = w.row(OPC_VGPR);
  uint32_t bx = P.block[0], by = P.block[1];
  for (int l = 0; l < 64; l++) {
    uint32_t t = first + l;
    if (t < nthreads) {
      ex |= 1ull << l;
      uint32_t x = t % bx, y = (t / bx) % by, z = t / (bx * by);
      uint32_t val = x;
      if (kd.vgpr_workitem_id >= 1) val |= y << 10;
      if (kd.vgpr_workitem_id >= 2) val |= z << 20;
      v0[l] = val;
    } else v0[l] = 0;
  }
  w.set_exec(ex);
  if (lc) lane_init(w, ex);
  // MODE register (hwreg 1): FP_ROUND [3:0], FP_DENORM [7:4], DX10_CLAMP [8], IEEE [9]
  w.mode = (uint32_t)kd.float_round_32 | ((uint32_t)kd.float_round_16_64 << 2) | ((uint32_t)kd.float_denorm_32 << 4) |
           ((uint32_t)kd.float_denorm_16_64 << 6) | ((uint32_t)kd.dx10_clamp << 8) | ((uint32_t)kd.ieee_mode << 9);
  if (priv_size) std::fill(w.priv.begin(), w.priv.end(), 0);
}

// ============================================================================ main loop
// The host's MXCSR follows the wave's MODE register for f32: FP_ROUND[1:0] (0 RNE, 1 +inf, 2 -inf,
// 3 toward zero) -> MXCSR RC; FP_DENORM[5:4] (0 flush in+out, 1 flush out, 2 flush in, 3 keep) ->
// DAZ (inputs) / FTZ (outputs). f64/f16 use the same host state (their own MODE bits are not applied).
static inline unsigned int mxcsr_for_mode(unsigned int base, uint32_t mode) {
  static const unsigned int rc[4] = {0x0000u, 0x4000u, 0x2000u, 0x6000u};
  static const unsigned int dn[4] = {0x8040u, 0x8000u, 0x0040u, 0x0000u};
  return (base & ~(0x8040u | 0x6000u)) | rc[mode & 3] | dn[(mode >> 4) & 3];
}

void Ctx::run_wave(Wave& w, uint32_t quantum) {
  unsigned int base = _mm_getcsr();
  uint32_t cur = w.mode;
  _mm_setcsr(mxcsr_for_mode(base, cur));
  // Watchdog: a wave that runs this many instructions without reaching s_barrier / s_endpgm is taken
  // to be spinning (e.g. on a flag only another workgroup would set: workgroups run one at a time here).
  static const uint64_t kBudget = [] {
    const char* e = std::getenv("MOONMATH_EMU_WAVE_BUDGET");
    return e ? std::strtoull(e, nullptr, 10) : 4000000000ull;
  }();
  for (uint32_t q = 0; w.state == WS_RUN && q < quantum; q++) {
    step(w);
    if (w.mode != cur) { cur = w.mode; _mm_setcsr(mxcsr_for_mode(base, cur)); }  // s_setreg of MODE
    if (++w.since_barrier > kBudget)
      throw EmuError("wave ran " + std::to_string(kBudget) + " instructions without reaching s_barrier or s_endpgm "
                     "(a spin-wait on another workgroup? set MOONMATH_EMU_WAVE_BUDGET to raise the limit), in " + where(w));
  }
}

void Ctx::step(Wave& w) {
  if (w.pc < 0 || w.pc >= (int)M.insts.size()) {
    throw EmuError("kernel '" + kd.name + "': program counter left the code (wave " + std::to_string(w.id) + ")");
  }
  if (tracing) P.trace->on_inst(w.id, w.pc, M.insts[w.pc], w.s, w.v, w.exec());  // timing hook
  if (w.mode & kModeGprIdxEn) [[unlikely]] {
    if (step_gpr_indexed(w)) return;
  }
  const Inst& in = M.insts[w.pc];
  const XInst& x = M.x[w.pc];
  icount[w.pc]++;
  if (hz && w.pending()) {
    bool is_load = in.enc == ENC_SMEM || in.enc == ENC_DS || in.enc == ENC_FLAT || in.enc == ENC_GLOBAL ||
                   in.enc == ENC_SCRATCH || in.enc == ENC_MUBUF || in.enc == ENC_MTBUF;
    hazard_regs(w, x, is_load);
  }
  if (!(x.avail & (gfx950 ? 2 : 1)))
    unsupported(w, in.row->name + (gfx950 ? " does not exist on gfx950" : " is a gfx950 (CDNA4) instruction; this is a gfx942 code object"));
  const uint64_t exec_in = w.exec();
  if (lc) lane_pre(w, in, x, exec_in);
  int next = w.pc + 1;
  switch (in.enc) {
    case ENC_SOP1: case ENC_SOP2: case ENC_SOPC: case ENC_SOPK: case ENC_SOPP: exec_salu(w, in, next); break;
    case ENC_SMEM: exec_smem(w, in); break;
    case ENC_VOP1: case ENC_VOP2: case ENC_VOPC: case ENC_VOP3: exec_valu(w, in, x); break;
    case ENC_VOP3P: case ENC_VOP3PX2:
      if (x.is_mfma) {
        mfma_partial += exec_in != ~0ull;  // an MFMA reads all 64 lanes whatever EXEC is
        if (lc) lane_mfma(w, in, x); else exec_mfma(w, in, x);
      }
      else exec_vop3p(w, in, x);
      break;
    case ENC_DS: exec_ds(w, in); break;
    case ENC_FLAT: case ENC_GLOBAL: case ENC_SCRATCH: exec_flat(w, in); break;
    case ENC_MUBUF: exec_mubuf(w, in); break;
    default:
      if (in.key == KEY_INVALID) unsupported(w, "cannot decode instruction: " + x.err);
      unsupported(w, std::string("unsupported encoding ") + enc_name(in.enc));
  }
  if (lc) lane_post(w, in, x, exec_in);
  if (w.state != WS_DONE) w.pc = next;
}

// VGPR index mode (s_set_gpr_idx_on; CDNA3/CDNA4 ISA, "GPR indexing"): while MODE.gpr_idx_en is set,
// a VALU instruction's VGPR operands enabled by M0[15:12] (bit 12 SRC0, 13 SRC1, 14 SRC2, 15 DST) use
// register number + M0[7:0]. Other operands (SGPRs, constants) and non-VALU instructions are unaffected.
// The indexed instruction runs as a re-decoded copy (rare: a few instructions per region in AITER's
// MLA kernels). Returns false when the instruction is not a VALU one (it then executes as usual).
// UNVERIFIED: AGPR operands and DPP/SDWA forms under indexing (refused), an index past v255 (refused).
bool Ctx::step_gpr_indexed(Wave& w) {
  if (w.pc < 0 || w.pc >= (int)M.insts.size()) return false;
  const Inst& in0 = M.insts[w.pc];
  const bool valu = in0.enc == ENC_VOP1 || in0.enc == ENC_VOP2 || in0.enc == ENC_VOPC || in0.enc == ENC_VOP3;
  if (!valu) {
    if (in0.enc == ENC_VOP3P || in0.enc == ENC_VOP3PX2)
      unsupported(w, "VOP3P/MFMA instructions in VGPR index mode (s_set_gpr_idx_on) are not modelled");
    return false;
  }
  if (in0.ext) unsupported(w, "DPP/SDWA instructions in VGPR index mode (s_set_gpr_idx_on) are not modelled");
  const uint32_t m0 = w.s[124], idx = m0 & 0xff, en = (m0 >> 12) & 0xf;
  Inst in = in0;
  auto shift = [&](uint16_t& code, int nregs) {
    if (code == OPC_NONE || code < OPC_VGPR) return;
    if (code >= OPC_AGPR) unsupported(w, "AGPR operands in VGPR index mode (s_set_gpr_idx_on) are not modelled");
    if (code - OPC_VGPR + idx + nregs > 256)
      throw EmuError("VGPR index mode: v" + std::to_string(code - OPC_VGPR) + " + index " + std::to_string(idx) +
                     " is past v255 in " + where(w));
    code = (uint16_t)(code + idx);
  };
  for (int i = 0; i < 3; i++) if (en >> i & 1) shift(in.src[i], (in.nbits[i] + 31) / 32);
  if (en >> 3 & 1) shift(in.dst, (in.dst_bits + 31) / 32);
  XInst x;
  analyse(in, x, gfx950);
  icount[w.pc]++;
  if (hz && w.pending()) hazard_regs(w, x, false);
  if (!(x.avail & (gfx950 ? 2 : 1))) unsupported(w, in.row->name + " does not exist on this architecture");
  const uint64_t exec_in = w.exec();
  exec_valu(w, in, x);
  if (lc) lane_post(w, in, x, exec_in);
  if (w.state != WS_DONE) w.pc = w.pc + 1;
  return true;
}

// ============================================================================ SALU / SOPP
uint32_t Ctx::getreg(Wave& w, int id) {
  switch (id) {
    case 1: return w.mode;
    case 2: return (w.scc ? 1u : 0u) | ((w.exec() == 0) << 9) | ((w.vcc() == 0) << 10);  // STATUS (partial)
    case 4: return (uint32_t)(w.id & 0xf);                                               // HW_ID (wave id only)
    case 6: return 0;
    case 3: return 0;
    case 20: return 0;  // XCC_ID
  }
  unsupported(w, "s_getreg of hardware register " + std::to_string(id) + " is not modelled");
}
void Ctx::setreg(Wave& w, int id, int off, int size, uint32_t v) {
  uint32_t mask = (size >= 32 ? 0xffffffffu : ((1u << size) - 1)) << off;
  if (id == 1) { w.mode = (w.mode & ~mask) | ((v << off) & mask); return; }
  if (id == 3) return;  // TRAPSTS: ignored
  unsupported(w, "s_setreg of hardware register " + std::to_string(id) + " is not modelled");
}

void Ctx::exec_salu(Wave& w, const Inst& in, int& next) {
  const int op = in.op;
  if (in.enc == ENC_SOPP) {
    switch (op) {
      case 0: case 14: case 15: case 16: case 17: case 19: case 20: case 21: case 22: case 31: return;  // nop, sleep, setprio, sendmsg, icache_inv, perf levels, ttrace
      case 28: w.mode &= ~kModeGprIdxEn; return;                                                   // s_set_gpr_idx_off
      case 29: w.s[124] = (w.s[124] & ~0xf000u) | ((uint32_t)(in.simm & 0xf) << 12); return;     // s_set_gpr_idx_mode
      case 1: w.vm_done = w.vm_issued; land_dma(w); w.state = WS_DONE; return;  // s_endpgm (outstanding loads complete)
      case 2: next = in.target; if (next < 0) throw EmuError("branch target is not an instruction in " + where(w)); return;
      case 4: if (!w.scc) next = in.target; break;
      case 5: if (w.scc) next = in.target; break;
      case 6: if (w.vcc() == 0) next = in.target; break;
      case 7: if (w.vcc() != 0) next = in.target; break;
      case 8: if (w.exec() == 0) next = in.target; break;
      case 9: if (w.exec() != 0) next = in.target; break;
      case 10:
        w.state = WS_BARRIER;
        if (hz) {
          if (w.vm_bar.size() <= epoch) { w.vm_bar.resize(epoch + 1, ~0ull); w.ds_bar.resize(epoch + 1, ~0ull); }
          w.vm_bar[epoch] = w.vm_done; w.ds_bar[epoch] = w.ds_done;
        }
        return;
      case 12: {  // s_waitcnt
        uint32_t s = (uint16_t)in.simm;
        uint32_t vm = (s & 0xf) | (((s >> 14) & 3) << 4), lgkm = (s >> 8) & 0xf;
        if (w.vm_issued - w.vm_done > vm) {
          // A wait that lands direct-to-LDS data first lets the workgroup's other waves run up to their
          // own waits or barriers (they would, while the load is in flight), then retires.
          if (!w.dma.empty() && w.dma.front().seq <= w.vm_issued - vm && !w.resume && nwaves > 1) {
            w.state = WS_YIELD; next = w.pc; icount[w.pc]--;  // counted once, when it retires
            return;
          }
          w.vm_done = w.vm_issued - vm;
          land_dma(w);
        }
        w.resume = false;
        if (lgkm == 0) { w.ds_done = w.ds_issued; w.sm_done = w.sm_issued; }
        else if (w.ds_issued - w.ds_done > lgkm) w.ds_done = w.ds_issued - lgkm;  // LDS returns in order
        return;
      }
      case 18: throw EmuError("s_trap executed (trap id " + std::to_string(in.simm & 0xff) + ") in " + where(w));
      default: unsupported(w, "unsupported SOPP opcode " + in.row->name);
    }
    if (next < 0) throw EmuError("branch target is not an instruction in " + where(w));
    return;
  }
  if (in.enc == ENC_SOPK) {
    int32_t imm = in.simm; uint32_t uimm = (uint16_t)in.simm;
    uint32_t& d = w.s[in.sdst < 128 ? in.sdst : 125];
    switch (op) {
      case 0: sw(w, in.sdst, (uint32_t)imm); return;
      case 1: if (w.scc) sw(w, in.sdst, (uint32_t)imm); return;
      case 2: w.scc = (int32_t)d == imm; return;
      case 3: w.scc = (int32_t)d != imm; return;
      case 4: w.scc = (int32_t)d > imm; return;
      case 5: w.scc = (int32_t)d >= imm; return;
      case 6: w.scc = (int32_t)d < imm; return;
      case 7: w.scc = (int32_t)d <= imm; return;
      case 8: w.scc = d == uimm; return;
      case 9: w.scc = d != uimm; return;
      case 10: w.scc = d > uimm; return;
      case 11: w.scc = d >= uimm; return;
      case 12: w.scc = d < uimm; return;
      case 13: w.scc = d <= uimm; return;
      case 14: { int64_t r = (int64_t)(int32_t)d + imm; uint32_t res = (uint32_t)r; w.scc = ((int32_t)d >= 0) == (imm >= 0) && ((int32_t)res >= 0) != ((int32_t)d >= 0); sw(w, in.sdst, res); return; }
      case 15: sw(w, in.sdst, (uint32_t)((int32_t)d * imm)); return;
      case 17: { int id = uimm & 0x3f, off = (uimm >> 6) & 0x1f, sz = ((uimm >> 11) & 0x1f) + 1;
        uint32_t v = getreg(w, id) >> off; if (sz < 32) v &= (1u << sz) - 1; sw(w, in.sdst, v); return; }
      case 18: { int id = uimm & 0x3f, off = (uimm >> 6) & 0x1f, sz = ((uimm >> 11) & 0x1f) + 1; setreg(w, id, off, sz, d); return; }
      case 20: { int id = uimm & 0x3f, off = (uimm >> 6) & 0x1f, sz = ((uimm >> 11) & 0x1f) + 1; setreg(w, id, off, sz, in.lit); return; }
      case 21: {  // s_call_b64
        uint64_t ret = co_base() + in.pc + 4; sw64(w, in.sdst, ret);
        next = M.idx_of((uint64_t)((int64_t)in.pc + 4 + 4 * (int64_t)imm)); if (next < 0) throw EmuError("s_call_b64 target outside the code in " + where(w)); return; }
      default: unsupported(w, "unsupported SOPK opcode " + in.row->name);
    }
  }
  if (in.enc == ENC_SOPC && op == 17) {
    // s_set_gpr_idx_on (ISA pseudocode): MODE.gpr_idx_en = 1; M0[7:0] = S0[7:0]; M0[15:12] = SIMM4
    // (the raw SSRC1 bits: SRC0, SRC1, SRC2, DST enables)
    w.mode |= kModeGprIdxEn;
    w.s[124] = (w.s[124] & ~0xf0ffu) | (sv(w, in, 0) & 0xffu) | ((uint32_t)(in.simm & 0xf) << 12);
    return;
  }
  if (in.enc == ENC_SOPC) {
    uint32_t a = sv(w, in, 0), b = (op == 18 || op == 19) ? 0 : sv(w, in, 1);
    switch (op) {
      case 0: w.scc = (int32_t)a == (int32_t)b; return;
      case 1: w.scc = a != b; return;
      case 2: w.scc = (int32_t)a > (int32_t)b; return;
      case 3: w.scc = (int32_t)a >= (int32_t)b; return;
      case 4: w.scc = (int32_t)a < (int32_t)b; return;
      case 5: w.scc = (int32_t)a <= (int32_t)b; return;
      case 6: w.scc = a == b; return;
      case 7: w.scc = a != b; return;
      case 8: w.scc = a > b; return;
      case 9: w.scc = a >= b; return;
      case 10: w.scc = a < b; return;
      case 11: w.scc = a <= b; return;
      case 12: w.scc = ((a >> (b & 31)) & 1) == 0; return;
      case 13: w.scc = ((a >> (b & 31)) & 1) == 1; return;
      case 14: w.scc = ((sv64(w, in, 0) >> (b & 63)) & 1) == 0; return;
      case 15: w.scc = ((sv64(w, in, 0) >> (b & 63)) & 1) == 1; return;
      case 18: w.scc = sv64(w, in, 0) == sv64(w, in, 1); return;
      case 19: w.scc = sv64(w, in, 0) != sv64(w, in, 1); return;
      default: unsupported(w, "unsupported SOPC opcode " + in.row->name);
    }
  }
  if (in.enc == ENC_SOP1) {
    const uint16_t d = in.sdst;
    switch (op) {
      case 50: w.s[124] = (w.s[124] & ~0xffu) | (sv(w, in, 0) & 0xffu); return;  // s_set_gpr_idx_idx: M0[7:0] = S0[7:0]
      case 0: sw(w, d, sv(w, in, 0)); return;
      case 1: sw64(w, d, sv64(w, in, 0)); return;
      case 2: if (w.scc) sw(w, d, sv(w, in, 0)); return;
      case 3: if (w.scc) sw64(w, d, sv64(w, in, 0)); return;
      case 4: { uint32_t r = ~sv(w, in, 0); sw(w, d, r); w.scc = r != 0; return; }
      case 5: { uint64_t r = ~sv64(w, in, 0); sw64(w, d, r); w.scc = r != 0; return; }
      case 8: { uint32_t a = sv(w, in, 0), r = 0; for (int i = 0; i < 32; i++) if (a >> i & 1) r |= 1u << (31 - i); sw(w, d, r); return; }
      case 10: { uint32_t r = 32 - __builtin_popcount(sv(w, in, 0)); sw(w, d, r); w.scc = r != 0; return; }
      case 11: { uint32_t r = 64 - __builtin_popcountll(sv64(w, in, 0)); sw(w, d, r); w.scc = r != 0; return; }
      case 12: { uint32_t r = __builtin_popcount(sv(w, in, 0)); sw(w, d, r); w.scc = r != 0; return; }
      case 13: { uint32_t r = __builtin_popcountll(sv64(w, in, 0)); sw(w, d, r); w.scc = r != 0; return; }
      case 14: { uint32_t a = ~sv(w, in, 0); sw(w, d, a ? __builtin_ctz(a) : 0xffffffffu); return; }
      case 15: { uint64_t a = ~sv64(w, in, 0); sw(w, d, a ? __builtin_ctzll(a) : 0xffffffffu); return; }
      case 16: { uint32_t a = sv(w, in, 0); sw(w, d, a ? __builtin_ctz(a) : 0xffffffffu); return; }
      case 17: { uint64_t a = sv64(w, in, 0); sw(w, d, a ? __builtin_ctzll(a) : 0xffffffffu); return; }
      case 18: { uint32_t a = sv(w, in, 0); sw(w, d, a ? __builtin_clz(a) : 0xffffffffu); return; }
      case 19: { uint64_t a = sv64(w, in, 0); sw(w, d, a ? __builtin_clzll(a) : 0xffffffffu); return; }
      case 20: { int32_t a = (int32_t)sv(w, in, 0); uint32_t r = 0xffffffffu;
        if (a != 0 && a != -1) { uint32_t u = a < 0 ? ~(uint32_t)a : (uint32_t)a; r = __builtin_clz(u); }
        sw(w, d, r); return; }
      case 22: sw(w, d, (uint32_t)(int32_t)(int8_t)sv(w, in, 0)); return;
      case 23: sw(w, d, (uint32_t)(int32_t)(int16_t)sv(w, in, 0)); return;
      case 24: { uint32_t r = w.s[d] & ~(1u << (sv(w, in, 0) & 31)); sw(w, d, r); return; }
      case 26: { uint32_t r = w.s[d] | (1u << (sv(w, in, 0) & 31)); sw(w, d, r); return; }
      case 25: { uint64_t r = mk64(w.s[d], w.s[d + 1]) & ~(1ull << (sv(w, in, 0) & 63)); sw64(w, d, r); return; }
      case 27: { uint64_t r = mk64(w.s[d], w.s[d + 1]) | (1ull << (sv(w, in, 0) & 63)); sw64(w, d, r); return; }
      case 28: sw64(w, d, co_base() + in.pc + 4); return;  // s_getpc_b64
      case 29: {  // s_setpc_b64
        uint64_t t = sv64(w, in, 0) - co_base(); next = M.idx_of(t);
        if (next < 0) throw EmuError("s_setpc_b64 to an address outside the code object in " + where(w));
        return; }
      case 30: {  // s_swappc_b64
        uint64_t t = sv64(w, in, 0) - co_base(); sw64(w, d, co_base() + in.pc + 4); next = M.idx_of(t);
        if (next < 0) throw EmuError("s_swappc_b64 to an address outside the code object in " + where(w));
        return; }
      case 32: case 33: case 34: case 35: case 36: case 37: case 38: case 39: case 51: case 52: {
        uint64_t s0 = sv64(w, in, 0), e = w.exec(), r = 0;
        switch (op) {
          case 32: r = s0 & e; break;
          case 33: r = s0 | e; break;
          case 34: r = s0 ^ e; break;
          case 35: r = s0 & ~e; break;
          case 36: r = s0 | ~e; break;
          case 37: r = ~(s0 & e); break;
          case 38: r = ~(s0 | e); break;
          case 39: r = ~(s0 ^ e); break;
          case 51: r = ~s0 & e; break;
          case 52: r = ~s0 | e; break;
        }
        sw64(w, d, e); w.set_exec(r); w.scc = r != 0; return;
      }
      case 53: { uint64_t r = ~sv64(w, in, 0) & w.exec(); w.set_exec(r); sw64(w, d, r); w.scc = r != 0; return; }  // andn1_wrexec
      case 54: { uint64_t r = sv64(w, in, 0) & ~w.exec(); w.set_exec(r); sw64(w, d, r); w.scc = r != 0; return; }  // andn2_wrexec
      case 48: { int32_t a = (int32_t)sv(w, in, 0); uint32_t r = a < 0 ? (uint32_t)(-(int64_t)a) : (uint32_t)a; sw(w, d, r); w.scc = r != 0; return; }
      case 41: { uint64_t a = sv64(w, in, 0), r = 0; for (int i = 0; i < 16; i++) if ((a >> (4 * i)) & 0xf) r |= 1ull << i; sw64(w, d, r); w.scc = r != 0; return; }
      case 7: { uint64_t a = sv64(w, in, 0), r = 0; for (int i = 0; i < 16; i++) if ((a >> (4 * i)) & 0xf) r |= 0xfull << (4 * i); sw64(w, d, r); w.scc = r != 0; return; }
      default: unsupported(w, "unsupported SOP1 opcode " + in.row->name);
    }
  }
  // SOP2
  const uint16_t d = in.sdst;
  switch (op) {
    case 0: { uint64_t r = (uint64_t)sv(w, in, 0) + sv(w, in, 1); sw(w, d, (uint32_t)r); w.scc = r >> 32; return; }
    case 1: { uint32_t a = sv(w, in, 0), b = sv(w, in, 1); sw(w, d, a - b); w.scc = b > a; return; }
    case 2: { int32_t a = sv(w, in, 0), b = sv(w, in, 1); int32_t r = (int32_t)((uint32_t)a + (uint32_t)b); w.scc = ((a >= 0) == (b >= 0)) && ((r >= 0) != (a >= 0)); sw(w, d, r); return; }
    case 3: { int32_t a = sv(w, in, 0), b = sv(w, in, 1); int32_t r = (int32_t)((uint32_t)a - (uint32_t)b); w.scc = ((a >= 0) != (b >= 0)) && ((r >= 0) != (a >= 0)); sw(w, d, r); return; }
    case 4: { uint64_t r = (uint64_t)sv(w, in, 0) + sv(w, in, 1) + (w.scc ? 1 : 0); sw(w, d, (uint32_t)r); w.scc = r >> 32; return; }
    case 5: { uint32_t a = sv(w, in, 0), b = sv(w, in, 1), c = w.scc; sw(w, d, a - b - c); w.scc = (uint64_t)b + c > a; return; }
    case 6: { int32_t a = sv(w, in, 0), b = sv(w, in, 1); w.scc = a < b; sw(w, d, w.scc ? a : b); return; }
    case 7: { uint32_t a = sv(w, in, 0), b = sv(w, in, 1); w.scc = a < b; sw(w, d, w.scc ? a : b); return; }
    case 8: { int32_t a = sv(w, in, 0), b = sv(w, in, 1); w.scc = a > b; sw(w, d, w.scc ? a : b); return; }
    case 9: { uint32_t a = sv(w, in, 0), b = sv(w, in, 1); w.scc = a > b; sw(w, d, w.scc ? a : b); return; }
    case 10: sw(w, d, w.scc ? sv(w, in, 0) : sv(w, in, 1)); return;
    case 11: sw64(w, d, w.scc ? sv64(w, in, 0) : sv64(w, in, 1)); return;
    case 12: case 14: case 16: case 18: case 20: case 22: case 24: case 26: {
      uint32_t a = sv(w, in, 0), b = sv(w, in, 1), r = 0;
      switch (op) { case 12: r = a & b; break; case 14: r = a | b; break; case 16: r = a ^ b; break; case 18: r = a & ~b; break;
        case 20: r = a | ~b; break; case 22: r = ~(a & b); break; case 24: r = ~(a | b); break; case 26: r = ~(a ^ b); break; }
      sw(w, d, r); w.scc = r != 0; return;
    }
    case 13: case 15: case 17: case 19: case 21: case 23: case 25: case 27: {
      uint64_t a = sv64(w, in, 0), b = sv64(w, in, 1), r = 0;
      switch (op) { case 13: r = a & b; break; case 15: r = a | b; break; case 17: r = a ^ b; break; case 19: r = a & ~b; break;
        case 21: r = a | ~b; break; case 23: r = ~(a & b); break; case 25: r = ~(a | b); break; case 27: r = ~(a ^ b); break; }
      sw64(w, d, r); w.scc = r != 0; return;
    }
    case 28: { uint32_t r = sv(w, in, 0) << (sv(w, in, 1) & 31); sw(w, d, r); w.scc = r != 0; return; }
    case 29: { uint64_t r = sv64(w, in, 0) << (sv(w, in, 1) & 63); sw64(w, d, r); w.scc = r != 0; return; }
    case 30: { uint32_t r = sv(w, in, 0) >> (sv(w, in, 1) & 31); sw(w, d, r); w.scc = r != 0; return; }
    case 31: { uint64_t r = sv64(w, in, 0) >> (sv(w, in, 1) & 63); sw64(w, d, r); w.scc = r != 0; return; }
    case 32: { uint32_t r = (uint32_t)((int32_t)sv(w, in, 0) >> (sv(w, in, 1) & 31)); sw(w, d, r); w.scc = r != 0; return; }
    case 33: { uint64_t r = (uint64_t)((int64_t)sv64(w, in, 0) >> (sv(w, in, 1) & 63)); sw64(w, d, r); w.scc = r != 0; return; }
    case 34: { uint32_t a = sv(w, in, 0) & 31, b = sv(w, in, 1) & 31; sw(w, d, ((1u << a) - 1) << b); return; }
    case 35: { uint32_t a = sv(w, in, 0) & 63, b = sv(w, in, 1) & 63; sw64(w, d, ((a == 64 ? 0 : (1ull << a)) - 1) << b); return; }
    case 36: sw(w, d, (uint32_t)((int32_t)sv(w, in, 0) * (int32_t)sv(w, in, 1))); return;
    case 37: { uint32_t a = sv(w, in, 0), b = sv(w, in, 1), off = b & 31, wd = (b >> 16) & 0x7f;
      uint32_t r = wd == 0 ? 0 : (a >> off) & (wd >= 32 ? 0xffffffffu : ((1u << wd) - 1)); sw(w, d, r); w.scc = r != 0; return; }
    case 38: { uint32_t a = sv(w, in, 0), b = sv(w, in, 1), off = b & 31, wd = (b >> 16) & 0x7f; int32_t r = 0;
      if (wd) { uint32_t t = (a >> off) & (wd >= 32 ? 0xffffffffu : ((1u << wd) - 1)); r = wd >= 32 ? (int32_t)t : ((int32_t)(t << (32 - wd)) >> (32 - wd)); }
      sw(w, d, (uint32_t)r); w.scc = r != 0; return; }
    case 39: { uint64_t a = sv64(w, in, 0); uint32_t b = sv(w, in, 1), off = b & 63, wd = (b >> 16) & 0x7f;
      uint64_t r = wd == 0 ? 0 : (a >> off) & (wd >= 64 ? ~0ull : ((1ull << wd) - 1)); sw64(w, d, r); w.scc = r != 0; return; }
    case 40: { uint64_t a = sv64(w, in, 0); uint32_t b = sv(w, in, 1), off = b & 63, wd = (b >> 16) & 0x7f; int64_t r = 0;
      if (wd) { uint64_t t = (a >> off) & (wd >= 64 ? ~0ull : ((1ull << wd) - 1)); r = wd >= 64 ? (int64_t)t : ((int64_t)(t << (64 - wd)) >> (64 - wd)); }
      sw64(w, d, (uint64_t)r); w.scc = r != 0; return; }
    case 42: { int32_t a = sv(w, in, 0), b = sv(w, in, 1); int64_t r = (int64_t)a - b; uint32_t u = (uint32_t)(r < 0 ? -r : r); sw(w, d, u); w.scc = u != 0; return; }
    case 44: sw(w, d, (uint32_t)(((uint64_t)sv(w, in, 0) * sv(w, in, 1)) >> 32)); return;
    case 45: sw(w, d, (uint32_t)(((int64_t)(int32_t)sv(w, in, 0) * (int32_t)sv(w, in, 1)) >> 32)); return;
    case 46: case 47: case 48: case 49: { uint64_t r = ((uint64_t)sv(w, in, 0) << (op - 45)) + sv(w, in, 1); sw(w, d, (uint32_t)r); w.scc = (r >> 32) != 0; return; }
    case 50: sw(w, d, (sv(w, in, 0) & 0xffff) | (sv(w, in, 1) << 16)); return;
    case 51: sw(w, d, (sv(w, in, 0) & 0xffff) | (sv(w, in, 1) & 0xffff0000u)); return;
    case 52: sw(w, d, (sv(w, in, 0) >> 16) | (sv(w, in, 1) & 0xffff0000u)); return;
    default: unsupported(w, "unsupported SOP2 opcode " + in.row->name);
  }
}

// ============================================================================ VALU (VOP1/VOP2/VOPC/VOP3 in VOP3 opcode space)
static inline int dpp_src_lane(int l, unsigned c) {
  if (c <= 0xff) return (l & ~3) | ((c >> ((l & 3) * 2)) & 3);
  if (c >= 0x101 && c <= 0x10f) { int n = c & 0xf; return (l & 15) + n > 15 ? -1 : l + n; }
  if (c >= 0x111 && c <= 0x11f) { int n = c & 0xf; return (l & 15) < n ? -1 : l - n; }
  // row_ror:n rotates right like row_shr:n shifts right: lane i reads lane i-n of its row (wrapping)
  if (c >= 0x121 && c <= 0x12f) { int n = c & 0xf; return (l & ~15) | (((l & 15) - n + 16) & 15); }
  // row_newbcast:n (gfx90a+; LLVM's DppCtrl ROW_NEWBCAST 0x150-0x15F, the encoding of gfx10's row_share):
  // every lane reads lane n of its own row of 16
  if (c >= 0x150 && c <= 0x15f) return (l & ~15) | (int)(c & 0xf);
  switch (c) {
    case 0x130: return l == 63 ? -1 : l + 1;
    case 0x134: return (l + 1) & 63;
    case 0x138: return l == 0 ? -1 : l - 1;
    case 0x13c: return (l + 63) & 63;
    case 0x140: return (l & ~15) | (15 - (l & 15));
    case 0x141: return (l & ~7) | (7 - (l & 7));
    case 0x142: return l < 16 ? -1 : (l & ~15) - 1;
    case 0x143: return l < 32 ? -1 : 31;
  }
  return -2;
}

static inline uint32_t sdwa_extract(uint32_t v, int sel, bool sext) {
  switch (sel) {
    case 0: case 1: case 2: case 3: { uint32_t b = (v >> (8 * sel)) & 0xff; return sext ? (uint32_t)(int32_t)(int8_t)b : b; }
    case 4: case 5: { uint32_t h = (v >> (16 * (sel - 4))) & 0xffff; return sext ? (uint32_t)(int32_t)(int16_t)h : h; }
  }
  return v;
}

static inline uint32_t fmod_bits(uint32_t v, int ft, bool ab, bool ng) {
  if (ft == 1) { if (ab) v &= 0x7fffffffu; if (ng) v ^= 0x80000000u; }
  else if (ft == 3) { if (ab) v &= 0xffff7fffu; if (ng) v ^= 0x8000u; }
  return v;
}

static inline bool fcmp(int cond, double a, double b) {
  switch (cond) {
    case 0: return false; case 1: return a < b; case 2: return a == b; case 3: return a <= b;
    case 4: return a > b; case 5: return a < b || a > b; case 6: return a >= b;
    case 7: return !std::isnan(a) && !std::isnan(b); case 8: return std::isnan(a) || std::isnan(b);
    case 9: return !(a >= b); case 10: return !(a < b || a > b); case 11: return !(a > b);
    case 12: return !(a <= b); case 13: return !(a == b); case 14: return !(a < b); case 15: return true;
  }
  return false;
}
template <class T> static inline bool icmp(int cond, T a, T b) {
  switch (cond) {
    case 0: return false; case 1: return a < b; case 2: return a == b; case 3: return a <= b;
    case 4: return a > b; case 5: return a != b; case 6: return a >= b; case 7: return true;
  }
  return false;
}

static inline uint32_t bfe_u(uint32_t a, uint32_t off, uint32_t wd) {
  off &= 31; wd &= 31;
  if (wd == 0) return 0;
  return (a >> off) & ((1u << wd) - 1);
}
static inline int32_t bfe_i(uint32_t a, uint32_t off, uint32_t wd) {
  off &= 31; wd &= 31;
  if (wd == 0) return 0;
  uint32_t t = (a >> off) & ((1u << wd) - 1);
  return (int32_t)(t << (32 - wd)) >> (32 - wd);
}
static inline uint8_t byte_perm(uint64_t data, uint32_t sel) {
  sel &= 0xff;
  if (sel >= 13) return 0xff;
  if (sel == 12) return 0;
  if (sel >= 8) { int b = (int)(sel - 8) * 2 + 1; return ((data >> (b * 8 + 7)) & 1) ? 0xff : 0; }
  return (uint8_t)(data >> (sel * 8));
}

static inline float fract32(float x) {
  if (std::isinf(x)) return std::nanf("");
  if (std::isnan(x)) return x;
  float r = x - std::floor(x);
  return std::min(r, 0x1.fffffep-1f);
}

void Ctx::exec_valu(Wave& w, const Inst& in, const XInst& x) {
  const int op = (int)in.key - ENC_VOP3 * 1024;
  uint64_t m = w.exec();
  const bool ieee = (w.mode >> 9) & 1;

  // ---- lane-crossing / scalar-result ops that ignore the generic path
  switch (op) {
    case 322: {  // v_readfirstlane_b32
      SR a = vs(w, in, 0);
      int l = m ? __builtin_ctzll(m) : 0;
      sw(w, in.dst, a[l]); return;
    }
    case 649: {  // v_readlane_b32
      SR a = vs(w, in, 0); int l = sv(w, in, 1) & 63; sw(w, in.dst, a[l]); return;
    }
    case 650: {  // v_writelane_b32
      uint32_t v = sv(w, in, 0); int l = sv(w, in, 1) & 63; w.row(in.dst)[l] = v; return;
    }
    case 320: return;  // v_nop
    case 401: {  // v_swap_b32
      uint32_t* a = w.row(in.dst); uint32_t* b = w.row(in.src[0]);
      lanes(m, [&](int l) { std::swap(a[l], b[l]); }); return;
    }
    case 409: case 410: {  // v_permlane16_swap_b32 / v_permlane32_swap_b32 (gfx950)
      if (!gfx950) unsupported(w, "v_permlane*_swap is gfx950-only");
      uint32_t* vd = w.row(in.dst); uint32_t* s0 = w.row(in.src[0]);
      if (op == 410) { for (int l = 0; l < 32; l++) std::swap(s0[l], vd[l + 32]); }
      else { for (int p = 0; p < 2; p++) for (int l = 0; l < 16; l++) std::swap(s0[p * 32 + l], vd[p * 32 + l + 16]); }
      return;
    }
  }

  if (op >= 565 && op <= 618 && exec_scalef32(w, in, op, m)) return;

  // ---- sources with DPP / SDWA / modifiers
  SR s0 = vs(w, in, 0), s1 = in.src[1] != OPC_NONE ? vs(w, in, 1) : SR{nullptr, 0}, s2 = in.src[2] != OPC_NONE ? vs(w, in, 2) : SR{nullptr, 0};
  if (in.ext == 1) {
    uint32_t* t = w.tmp[0][0];
    uint64_t ok = 0;
    uint64_t rowm = 0;
    for (int r = 0; r < 4; r++) if (in.row_mask >> r & 1) rowm |= 0xffffull << (16 * r);
    uint64_t bankm = 0;
    for (int l = 0; l < 64; l++) if (in.bank_mask >> ((l >> 2) & 3) & 1) bankm |= 1ull << l;
    for (int l = 0; l < 64; l++) {
      int sl = dpp_src_lane(l, in.dpp_ctrl);
      if (sl == -2) unsupported(w, "unsupported DPP control");
      if (sl >= 0 && (m >> sl & 1)) { t[l] = s0[sl]; ok |= 1ull << l; }
      else if (in.bound_ctrl) { t[l] = 0; ok |= 1ull << l; }
      else t[l] = 0;
    }
    s0 = SR{t, 63};
    m &= ok & rowm & bankm;
  } else if (in.ext == 2) {
    for (int i = 0; i < 2; i++) {
      SR& sr = i == 0 ? s0 : s1;
      if (!sr.p) continue;
      if (in.src_sel[i] == 6) continue;
      uint32_t* t = w.tmp[i][0];
      for (int l = 0; l < 64; l++) t[l] = sdwa_extract(sr[l], in.src_sel[i], in.src_sext[i]);
      sr = SR{t, 63};
    }
  }
  // VOP3 op_sel for 16-bit operands (gfx9: op_sel[i] selects the high half of source i)
  if (in.enc == ENC_VOP3 && in.opsel & 7) {
    for (int i = 0; i < 3; i++) {
      if (!(in.opsel >> i & 1)) continue;
      SR& sr = i == 0 ? s0 : i == 1 ? s1 : s2;
      if (!sr.p) continue;
      uint32_t* t = w.tmp[i][1];
      for (int l = 0; l < 64; l++) t[l] = sr[l] >> 16;
      sr = SR{t, 63};
    }
  }
  if ((in.abs | in.neg) && in.enc != ENC_VOP3P) {
    for (int i = 0; i < 3; i++) {
      bool ab = in.abs >> i & 1, ng = in.neg >> i & 1;
      if (!ab && !ng) continue;
      int ft = x.ftype[i];
      SR& sr = i == 0 ? s0 : i == 1 ? s1 : s2;
      if (!sr.p) continue;
      if (ft == 2) {  // f64: modify the high dword (read later through vs(.., 1)) -> handled in f64 ops
        continue;
      }
      if (ft == 0) continue;
      uint32_t* t = w.tmp[i][1];
      for (int l = 0; l < 64; l++) t[l] = fmod_bits(sr[l], ft, ab, ng);
      sr = SR{t, 63};
    }
  }
  auto hi64 = [&](int i) -> SR {
    SR h = vs(w, in, i, 1);
    bool ab = in.abs >> i & 1, ng = in.neg >> i & 1;
    if ((ab || ng) && x.ftype[i] == 2) {
      uint32_t* t = w.tmp[i][1];
      for (int l = 0; l < 64; l++) { uint32_t v = h[l]; if (ab) v &= 0x7fffffffu; if (ng) v ^= 0x80000000u; t[l] = v; }
      return SR{t, 63};
    }
    return h;
  };

  // ---- VOPC
  if (op < 256) {
    uint64_t r = 0;
    bool cmpx = false;
    auto set = [&](int l, bool c) { if (c) r |= 1ull << l; };
    if (op >= 16 && op <= 21) {
      cmpx = op & 1;
      if (op <= 17) lanes(m, [&](int l) { set(l, (s1[l] >> f32_class_bit(s0[l])) & 1); });
      else if (op <= 19) { SR h = vs(w, in, 0, 1); lanes(m, [&](int l) { set(l, (s1[l] >> f64_class_bit(mk64(s0[l], h[l]))) & 1); }); }
      else lanes(m, [&](int l) { set(l, (s1[l] >> f16_class_bit(s0[l])) & 1); });
    } else if (op >= 32 && op <= 63) {
      int c = op & 15; cmpx = op >= 48;
      lanes(m, [&](int l) { set(l, fcmp(c, h2f(s0[l]), h2f(s1[l]))); });
    } else if (op >= 64 && op <= 95) {
      int c = op & 15; cmpx = op >= 80;
      lanes(m, [&](int l) { set(l, fcmp(c, F(s0[l]), F(s1[l]))); });
    } else if (op >= 96 && op <= 127) {
      int c = op & 15; cmpx = op >= 112;
      SR a1 = hi64(0), b1 = hi64(1);
      lanes(m, [&](int l) { set(l, fcmp(c, D(mk64(s0[l], a1[l])), D(mk64(s1[l], b1[l])))); });
    } else if (op >= 160 && op <= 191) {
      int c = op & 7; bool u = (op & 8); cmpx = op >= 176;
      if (u) lanes(m, [&](int l) { set(l, icmp<uint16_t>(c, (uint16_t)s0[l], (uint16_t)s1[l])); });
      else lanes(m, [&](int l) { set(l, icmp<int16_t>(c, (int16_t)s0[l], (int16_t)s1[l])); });
    } else if (op >= 192 && op <= 223) {
      int c = op & 7; bool u = (op & 8); cmpx = op >= 208;
      if (u) lanes(m, [&](int l) { set(l, icmp<uint32_t>(c, s0[l], s1[l])); });
      else lanes(m, [&](int l) { set(l, icmp<int32_t>(c, (int32_t)s0[l], (int32_t)s1[l])); });
    } else if (op >= 224) {
      int c = op & 7; bool u = (op & 8); cmpx = op >= 240;
      SR a1 = vs(w, in, 0, 1), b1 = vs(w, in, 1, 1);
      if (u) lanes(m, [&](int l) { set(l, icmp<uint64_t>(c, mk64(s0[l], a1[l]), mk64(s1[l], b1[l]))); });
      else lanes(m, [&](int l) { set(l, icmp<int64_t>(c, (int64_t)mk64(s0[l], a1[l]), (int64_t)mk64(s1[l], b1[l]))); });
    } else unsupported(w, "unsupported VOPC opcode " + in.row->name);
    sw64(w, in.sdst, r);
    if (cmpx) w.set_exec(r);
    return;
  }

  // ---- vector destination
  uint32_t* d = in.dst != OPC_NONE && in.dst >= OPC_VGPR ? w.row(in.dst) : nullptr;
  uint32_t* d1 = d ? d + 64 : nullptr;
  bool sdwa_dst = in.ext == 2 && in.dst_sel != 6 && d;
  uint32_t* dfinal = d;
  if (sdwa_dst) d = w.dtmp[0];
  bool opsel_hi_dst = in.enc == ENC_VOP3 && (in.opsel & 8);
  if (opsel_hi_dst) d = w.dtmp[0];
  bool f16_zero_hi = false;

  switch (op) {
    // ---------------- VOP2
    case 256: { uint64_t msk = in.is_const[2] ? in.cval[2] : (in.src[2] < 127 ? mk64(w.s[in.src[2]], w.s[in.src[2] + 1]) : 0);
      lanes(m, [&](int l) { d[l] = (msk >> l & 1) ? s1[l] : s0[l]; }); break; }
    case 257: lanes(m, [&](int l) { d[l] = B(F(s0[l]) + F(s1[l])); }); break;
    case 258: lanes(m, [&](int l) { d[l] = B(F(s0[l]) - F(s1[l])); }); break;
    case 259: lanes(m, [&](int l) { d[l] = B(F(s1[l]) - F(s0[l])); }); break;
    case 261: lanes(m, [&](int l) { d[l] = B(F(s0[l]) * F(s1[l])); }); break;
    case 673: lanes(m, [&](int l) { float a = F(s0[l]), b = F(s1[l]); d[l] = (a == 0 || b == 0) ? 0u : B(a * b); }); break;  // v_mul_legacy_f32
    case 262: lanes(m, [&](int l) { d[l] = (uint32_t)((int32_t)(s0[l] << 8) >> 8) * (uint32_t)((int32_t)(s1[l] << 8) >> 8); }); break;
    case 263: lanes(m, [&](int l) { int64_t r = (int64_t)((int32_t)(s0[l] << 8) >> 8) * ((int32_t)(s1[l] << 8) >> 8); d[l] = (uint32_t)(r >> 32); }); break;
    case 264: lanes(m, [&](int l) { d[l] = (s0[l] & 0xffffff) * (s1[l] & 0xffffff); }); break;
    case 265: lanes(m, [&](int l) { d[l] = (uint32_t)(((uint64_t)(s0[l] & 0xffffff) * (s1[l] & 0xffffff)) >> 32); }); break;
    case 266: lanes(m, [&](int l) { d[l] = vmin32(s0[l], s1[l], ieee); }); break;
    case 267: lanes(m, [&](int l) { d[l] = vmax32(s0[l], s1[l], ieee); }); break;
    case 268: lanes(m, [&](int l) { d[l] = (uint32_t)std::min((int32_t)s0[l], (int32_t)s1[l]); }); break;
    case 269: lanes(m, [&](int l) { d[l] = (uint32_t)std::max((int32_t)s0[l], (int32_t)s1[l]); }); break;
    case 270: lanes(m, [&](int l) { d[l] = std::min(s0[l], s1[l]); }); break;
    case 271: lanes(m, [&](int l) { d[l] = std::max(s0[l], s1[l]); }); break;
    case 272: lanes(m, [&](int l) { d[l] = s1[l] >> (s0[l] & 31); }); break;
    case 273: lanes(m, [&](int l) { d[l] = (uint32_t)((int32_t)s1[l] >> (s0[l] & 31)); }); break;
    case 274: lanes(m, [&](int l) { d[l] = s1[l] << (s0[l] & 31); }); break;
    case 275: lanes(m, [&](int l) { d[l] = s0[l] & s1[l]; }); break;
    case 276: lanes(m, [&](int l) { d[l] = s0[l] | s1[l]; }); break;
    case 277: lanes(m, [&](int l) { d[l] = s0[l] ^ s1[l]; }); break;
    case 317: lanes(m, [&](int l) { d[l] = ~(s0[l] ^ s1[l]); }); break;
    case 279: case 280: {  // v_fmamk_f32 (S0*K+S1) / v_fmaak_f32 (S0*S1+K)
      uint32_t* k = w.bc[3][0]; for (int l = 0; l < 64; l++) k[l] = in.lit;
      if (op == 279) fma_lanes(m, d, s0.p, k, s1.p); else fma_lanes(m, d, s0.p, s1.p, k);
      break; }
    case 315: fma_lanes(m, d, s0.p, s1.p, s2.p); break;  // v_fmac_f32
    case 260: { SR a1 = hi64(0), b1 = hi64(1), c1 = vs(w, in, 2, 1);
      lanes(m, [&](int l) { uint64_t r = BD(std::fma(D(mk64(s0[l], a1[l])), D(mk64(s1[l], b1[l])), D(mk64(s2[l], c1[l])))); d[l] = (uint32_t)r; d1[l] = (uint32_t)(r >> 32); }); break; }
    case 278: lanes(m, [&](int l) {  // v_dot2c_f32_bf16: D = S0.bf16[0]*S1.bf16[0] + S0.bf16[1]*S1.bf16[1] + D
      double r = (double)num::bf16_to_f32(s0[l] & 0xffff) * num::bf16_to_f32(s1[l] & 0xffff) + (double)num::bf16_to_f32(s0[l] >> 16) * num::bf16_to_f32(s1[l] >> 16) + F(s2[l]);
      d[l] = B((float)r); }); break;
    case 312: case 313: case 314: {  // v_dot2c_i32_i16 / v_dot4c_i32_i8 / v_dot8c_i32_i4: D += dot(S0, S1)
      int eb = op == 312 ? 16 : op == 313 ? 8 : 4;
      lanes(m, [&](int l) {
        int64_t acc = (int32_t)s2[l];
        for (int i = 0; i < 32 / eb; i++) {
          int32_t x = (int32_t)(((s0[l] >> (eb * i)) & ((1u << eb) - 1)) << (32 - eb)) >> (32 - eb);
          int32_t y = (int32_t)(((s1[l] >> (eb * i)) & ((1u << eb) - 1)) << (32 - eb)) >> (32 - eb);
          acc += (int64_t)x * y;
        }
        if (in.clamp) acc = std::min<int64_t>(INT32_MAX, std::max<int64_t>(INT32_MIN, acc));
        d[l] = (uint32_t)acc; });
      goto done_nomod;
    }
    case 311: lanes(m, [&](int l) {  // v_dot2c_f32_f16
      double r = (double)h2f(s0[l] & 0xffff) * h2f(s1[l] & 0xffff) + (double)h2f(s0[l] >> 16) * h2f(s1[l] >> 16) + F(s2[l]);
      d[l] = B((float)r); }); break;
    case 281: case 282: case 283: case 284: case 285: case 286: {  // add/sub co (carry out to sdst)
      uint64_t cin = 0, cout = 0;
      if (op >= 284) cin = in.src[2] < 128 ? mk64(w.s[in.src[2]], w.s[in.src[2] + 1]) : (in.is_const[2] ? in.cval[2] : 0);
      lanes(m, [&](int l) {
        uint64_t a = s0[l], b = s1[l], c = (cin >> l) & 1, r; bool co;
        switch (op) {
          case 281: r = a + b; co = r >> 32; break;
          case 282: r = a - b; co = b > a; break;
          case 283: r = b - a; co = a > b; break;
          case 284: r = a + b + c; co = r >> 32; break;
          case 285: r = a - b - c; co = b + c > a; break;
          default: r = b - a - c; co = a + c > b; break;
        }
        d[l] = (uint32_t)r; if (co) cout |= 1ull << l;
      });
      if (in.sdst != OPC_NONE) sw64(w, in.sdst, cout);
      break;
    }
    // Integer add/sub: the VOP3 clamp bit saturates (unsigned for _u32, signed for _i32) instead of
    // wrapping; LLVM selects it for llvm.uadd.sat/usub.sat/sadd.sat/ssub.sat on gfx9.
    case 308: case 309: case 310: {
      const bool sat = in.clamp;
      lanes(m, [&](int l) {
        const uint64_t a = op == 310 ? s1[l] : s0[l], b = op == 310 ? s0[l] : s1[l];
        const int64_t r = op == 308 ? (int64_t)(a + b) : (int64_t)a - (int64_t)b;
        d[l] = sat ? (uint32_t)std::min<int64_t>(std::max<int64_t>(r, 0), 0xffffffffLL) : (uint32_t)r; });
      if (sat) goto done_nomod;
      break;
    }
    case 668: case 669: {  // v_add_i32 / v_sub_i32
      const bool sat = in.clamp;
      lanes(m, [&](int l) {
        const int64_t a = (int32_t)s0[l], b = (int32_t)s1[l], r = op == 668 ? a + b : a - b;
        d[l] = sat ? (uint32_t)(int32_t)std::min<int64_t>(std::max<int64_t>(r, INT32_MIN), INT32_MAX) : (uint32_t)r; });
      if (sat) goto done_nomod;
      break;
    }
    // 16-bit VOP2
    case 287: f16_zero_hi = true; lanes(m, [&](int l) { d[l] = f2h(h2f(s0[l]) + h2f(s1[l])); }); break;
    case 288: f16_zero_hi = true; lanes(m, [&](int l) { d[l] = f2h(h2f(s0[l]) - h2f(s1[l])); }); break;
    case 289: f16_zero_hi = true; lanes(m, [&](int l) { d[l] = f2h(h2f(s1[l]) - h2f(s0[l])); }); break;
    case 290: f16_zero_hi = true; lanes(m, [&](int l) { d[l] = f2h(h2f(s0[l]) * h2f(s1[l])); }); break;
    case 301: f16_zero_hi = true; lanes(m, [&](int l) { d[l] = f2h(std::fmax(h2f(s0[l]), h2f(s1[l]))); }); break;
    case 302: f16_zero_hi = true; lanes(m, [&](int l) { d[l] = f2h(std::fmin(h2f(s0[l]), h2f(s1[l]))); }); break;
    case 294: f16_zero_hi = true; lanes(m, [&](int l) { d[l] = (s0[l] + s1[l]) & 0xffff; }); break;
    case 295: f16_zero_hi = true; lanes(m, [&](int l) { d[l] = (s0[l] - s1[l]) & 0xffff; }); break;
    case 296: f16_zero_hi = true; lanes(m, [&](int l) { d[l] = (s1[l] - s0[l]) & 0xffff; }); break;
    case 297: f16_zero_hi = true; lanes(m, [&](int l) { d[l] = (s0[l] * s1[l]) & 0xffff; }); break;
    case 298: f16_zero_hi = true; lanes(m, [&](int l) { d[l] = ((s1[l] & 0xffff) << (s0[l] & 15)) & 0xffff; }); break;
    case 299: f16_zero_hi = true; lanes(m, [&](int l) { d[l] = (s1[l] & 0xffff) >> (s0[l] & 15); }); break;
    case 300: f16_zero_hi = true; lanes(m, [&](int l) { d[l] = (uint32_t)((int16_t)s1[l] >> (s0[l] & 15)) & 0xffff; }); break;
    case 303: f16_zero_hi = true; lanes(m, [&](int l) { d[l] = std::max(s0[l] & 0xffff, s1[l] & 0xffff); }); break;
    case 304: f16_zero_hi = true; lanes(m, [&](int l) { d[l] = (uint32_t)std::max((int16_t)s0[l], (int16_t)s1[l]) & 0xffff; }); break;
    case 305: f16_zero_hi = true; lanes(m, [&](int l) { d[l] = std::min(s0[l] & 0xffff, s1[l] & 0xffff); }); break;
    case 306: f16_zero_hi = true; lanes(m, [&](int l) { d[l] = (uint32_t)std::min((int16_t)s0[l], (int16_t)s1[l]) & 0xffff; }); break;
    case 307: f16_zero_hi = true; lanes(m, [&](int l) { d[l] = f2h(std::ldexp(h2f(s0[l]), (int16_t)s1[l])); }); break;
    // ---------------- VOP1
    case 321: lanes(m, [&](int l) { d[l] = s0[l]; }); break;
    case 402: lanes(m, [&](int l) { d[l] = s0[l]; }); break;  // v_accvgpr_mov_b32
    case 376: { SR a1 = vs(w, in, 0, 1); lanes(m, [&](int l) { d[l] = s0[l]; d1[l] = a1[l]; }); break; }
    case 323: { SR a1 = hi64(0); lanes(m, [&](int l) { d[l] = (uint32_t)cvt_i32(D(mk64(s0[l], a1[l]))); }); break; }
    case 341: { SR a1 = hi64(0); lanes(m, [&](int l) { d[l] = cvt_u32(D(mk64(s0[l], a1[l]))); }); break; }
    case 324: lanes(m, [&](int l) { uint64_t r = BD((double)(int32_t)s0[l]); d[l] = (uint32_t)r; d1[l] = (uint32_t)(r >> 32); }); break;
    case 342: lanes(m, [&](int l) { uint64_t r = BD((double)s0[l]); d[l] = (uint32_t)r; d1[l] = (uint32_t)(r >> 32); }); break;
    case 325: lanes(m, [&](int l) { d[l] = B((float)(int32_t)s0[l]); }); break;
    case 326: lanes(m, [&](int l) { d[l] = B((float)s0[l]); }); break;
    case 327: lanes(m, [&](int l) { d[l] = cvt_u32(F(s0[l])); }); break;
    case 328: lanes(m, [&](int l) { d[l] = (uint32_t)cvt_i32(F(s0[l])); }); break;
    case 330: f16_zero_hi = true; lanes(m, [&](int l) { d[l] = f2h(F(s0[l])); }); break;
    case 331: lanes(m, [&](int l) { d[l] = B(h2f(s0[l])); }); break;
    case 332: lanes(m, [&](int l) { d[l] = (uint32_t)cvt_i32(std::floor(F(s0[l]) + 0.5f)); }); break;
    case 333: lanes(m, [&](int l) { d[l] = (uint32_t)cvt_i32(std::floor(F(s0[l]))); }); break;
    // v_cvt_off_f32_i4: the signed low nibble in sixteenths (ISA lookup table: 1000b -> -0.5, 0111b -> 0.4375)
    case 334: lanes(m, [&](int l) { d[l] = B((float)((int32_t)(s0[l] << 28) >> 28) * 0.0625f); }); break;
    case 335: { SR a1 = hi64(0); lanes(m, [&](int l) { d[l] = B((float)D(mk64(s0[l], a1[l]))); }); break; }
    case 336: lanes(m, [&](int l) { uint64_t r = BD((double)F(s0[l])); d[l] = (uint32_t)r; d1[l] = (uint32_t)(r >> 32); }); break;
    case 337: case 338: case 339: case 340: { int sh = (op - 337) * 8; lanes(m, [&](int l) { d[l] = B((float)((s0[l] >> sh) & 0xff)); }); break; }
    case 343: case 344: case 345: case 346: { SR a1 = hi64(0); lanes(m, [&](int l) { double v = D(mk64(s0[l], a1[l]));
      double r = op == 343 ? std::trunc(v) : op == 344 ? std::ceil(v) : op == 345 ? std::nearbyint(v) : std::floor(v);
      uint64_t u = BD(r); d[l] = (uint32_t)u; d1[l] = (uint32_t)(u >> 32); }); break; }
    case 347: lanes(m, [&](int l) { d[l] = B(fract32(F(s0[l]))); }); break;
    case 348: lanes(m, [&](int l) { d[l] = B(std::trunc(F(s0[l]))); }); break;
    case 349: lanes(m, [&](int l) { d[l] = B(std::ceil(F(s0[l]))); }); break;
    case 350: lanes(m, [&](int l) { d[l] = B(std::nearbyint(F(s0[l]))); }); break;
    case 351: lanes(m, [&](int l) { d[l] = B(std::floor(F(s0[l]))); }); break;
    case 352: lanes(m, [&](int l) { d[l] = B(std::exp2(F(s0[l]))); }); break;
    case 353: lanes(m, [&](int l) { d[l] = B(std::log2(F(s0[l]))); }); break;
    case 354: case 355: lanes(m, [&](int l) { d[l] = B(1.0f / F(s0[l])); }); break;
    case 356: lanes(m, [&](int l) { d[l] = B((float)(1.0 / std::sqrt((double)F(s0[l])))); }); break;
    case 359: lanes(m, [&](int l) { d[l] = B(std::sqrt(F(s0[l]))); }); break;
    case 361: lanes(m, [&](int l) { d[l] = B((float)std::sin((double)F(s0[l]) * 2.0 * M_PI)); }); break;
    case 362: lanes(m, [&](int l) { d[l] = B((float)std::cos((double)F(s0[l]) * 2.0 * M_PI)); }); break;
    case 357: case 358: case 360: { SR a1 = hi64(0); lanes(m, [&](int l) { double v = D(mk64(s0[l], a1[l]));
      double r = op == 357 ? 1.0 / v : op == 358 ? 1.0 / std::sqrt(v) : std::sqrt(v);
      uint64_t u = BD(r); d[l] = (uint32_t)u; d1[l] = (uint32_t)(u >> 32); }); break; }
    case 363: lanes(m, [&](int l) { d[l] = ~s0[l]; }); break;
    case 364: lanes(m, [&](int l) { uint32_t a = s0[l], r = 0; for (int i = 0; i < 32; i++) if (a >> i & 1) r |= 1u << (31 - i); d[l] = r; }); break;
    case 365: lanes(m, [&](int l) { d[l] = s0[l] ? __builtin_clz(s0[l]) : 0xffffffffu; }); break;
    case 366: lanes(m, [&](int l) { d[l] = s0[l] ? __builtin_ctz(s0[l]) : 0xffffffffu; }); break;
    case 367: lanes(m, [&](int l) { int32_t a = (int32_t)s0[l]; d[l] = (a == 0 || a == -1) ? 0xffffffffu : __builtin_clz(a < 0 ? ~(uint32_t)a : (uint32_t)a); }); break;
    case 371: lanes(m, [&](int l) { float v = F(s0[l]); int e = 0; if (std::isfinite(v) && v != 0) std::frexp(v, &e); d[l] = (uint32_t)e; }); break;
    case 372: lanes(m, [&](int l) { float v = F(s0[l]); int e; d[l] = (!std::isfinite(v)) ? s0[l] : B(std::frexp(v, &e)); }); break;
    case 381: f16_zero_hi = true; lanes(m, [&](int l) { d[l] = f2h(1.0f / h2f(s0[l])); }); break;
    case 382: f16_zero_hi = true; lanes(m, [&](int l) { d[l] = f2h(std::sqrt(h2f(s0[l]))); }); break;
    case 383: f16_zero_hi = true; lanes(m, [&](int l) { d[l] = f2h(1.0f / std::sqrt(h2f(s0[l]))); }); break;
    case 384: f16_zero_hi = true; lanes(m, [&](int l) { d[l] = f2h(std::log2(h2f(s0[l]))); }); break;
    case 385: f16_zero_hi = true; lanes(m, [&](int l) { d[l] = f2h(std::exp2(h2f(s0[l]))); }); break;
    case 377: f16_zero_hi = true; lanes(m, [&](int l) { d[l] = f2h((float)(s0[l] & 0xffff)); }); break;
    case 378: f16_zero_hi = true; lanes(m, [&](int l) { d[l] = f2h((float)(int16_t)s0[l]); }); break;
    case 379: f16_zero_hi = true; lanes(m, [&](int l) { float v = h2f(s0[l]); d[l] = std::isnan(v) ? 0 : (uint32_t)std::min(65535.f, std::max(0.f, std::trunc(v))); }); break;
    case 380: f16_zero_hi = true; lanes(m, [&](int l) { float v = h2f(s0[l]); d[l] = std::isnan(v) ? 0 : (uint32_t)(int32_t)std::min(32767.f, std::max(-32768.f, std::trunc(v))) & 0xffff; }); break;
    case 388: case 389: case 390: case 391: f16_zero_hi = true; lanes(m, [&](int l) { float v = h2f(s0[l]);
      float r = op == 388 ? std::floor(v) : op == 389 ? std::ceil(v) : op == 390 ? std::trunc(v) : std::nearbyint(v); d[l] = f2h(r); }); break;
    case 411: {  // v_cvt_f32_bf16 (gfx950)
      int sel = (in.ext == 2 && in.src_sel[0] == 5) || (in.enc == ENC_VOP3 && (in.opsel & 1)) ? 16 : 0;
      SR raw = in.ext == 2 ? vs(w, in, 0) : s0;
      if (in.enc == ENC_VOP3 && (in.opsel & 1)) raw = vs(w, in, 0);
      lanes(m, [&](int l) { d[l] = ((raw[l] >> sel) & 0xffff) << 16; }); break;
    }
    case 404: case 405: {  // v_cvt_f32_fp8 / v_cvt_f32_bf8
      SR raw = vs(w, in, 0);
      int byte = 0;
      if (in.ext == 2 && in.src_sel[0] <= 3) byte = in.src_sel[0];
      if (in.enc == ENC_VOP3) byte = (in.opsel & 3);
      num::Fmt f = op == 404 ? num::fp8_fmt(gfx950) : num::bf8_fmt(gfx950);
      lanes(m, [&](int l) { d[l] = B(num::decode(f, (raw[l] >> (8 * byte)) & 0xff)); }); break;
    }
    case 406: case 407: {  // v_cvt_pk_f32_fp8 / bf8
      SR raw = vs(w, in, 0);
      int word = (in.ext == 2 && in.src_sel[0] == 5) || (in.enc == ENC_VOP3 && (in.opsel & 1)) ? 1 : 0;
      num::Fmt f = op == 406 ? num::fp8_fmt(gfx950) : num::bf8_fmt(gfx950);
      lanes(m, [&](int l) { uint32_t t = raw[l] >> (16 * word); d[l] = B(num::decode(f, t & 0xff)); d1[l] = B(num::decode(f, (t >> 8) & 0xff)); }); break;
    }
    // ---------------- VOP3-only
    case 450: lanes(m, [&](int l) { d[l] = (uint32_t)((int32_t)(s0[l] << 8) >> 8) * (uint32_t)((int32_t)(s1[l] << 8) >> 8) + s2[l]; }); break;
    case 451: lanes(m, [&](int l) { d[l] = (s0[l] & 0xffffff) * (s1[l] & 0xffffff) + s2[l]; }); break;
    case 456: lanes(m, [&](int l) { d[l] = bfe_u(s0[l], s1[l], s2[l]); }); break;
    case 457: lanes(m, [&](int l) { d[l] = (uint32_t)bfe_i(s0[l], s1[l], s2[l]); }); break;
    case 458: lanes(m, [&](int l) { d[l] = (s0[l] & s1[l]) | (~s0[l] & s2[l]); }); break;
    case 459: fma_lanes(m, d, s0.p, s1.p, s2.p); break;
    case 460: { SR a1 = hi64(0), b1 = hi64(1), c1 = hi64(2);
      lanes(m, [&](int l) { uint64_t r = BD(std::fma(D(mk64(s0[l], a1[l])), D(mk64(s1[l], b1[l])), D(mk64(s2[l], c1[l])))); d[l] = (uint32_t)r; d1[l] = (uint32_t)(r >> 32); }); break; }
    case 462: lanes(m, [&](int l) { d[l] = (uint32_t)(mk64(s1[l], s0[l]) >> (s2[l] & 31)); }); break;
    case 463: lanes(m, [&](int l) { d[l] = (uint32_t)(mk64(s1[l], s0[l]) >> (8 * (s2[l] & 3))); }); break;
    case 464: lanes(m, [&](int l) { d[l] = vmin32(vmin32(s0[l], s1[l], ieee), s2[l], ieee); }); break;
    case 467: lanes(m, [&](int l) { d[l] = vmax32(vmax32(s0[l], s1[l], ieee), s2[l], ieee); }); break;
    case 465: lanes(m, [&](int l) { d[l] = (uint32_t)std::min({(int32_t)s0[l], (int32_t)s1[l], (int32_t)s2[l]}); }); break;
    case 468: lanes(m, [&](int l) { d[l] = (uint32_t)std::max({(int32_t)s0[l], (int32_t)s1[l], (int32_t)s2[l]}); }); break;
    case 466: lanes(m, [&](int l) { d[l] = std::min({s0[l], s1[l], s2[l]}); }); break;
    case 469: lanes(m, [&](int l) { d[l] = std::max({s0[l], s1[l], s2[l]}); }); break;
    case 470: lanes(m, [&](int l) {  // v_med3_f32 per ISA pseudocode
      uint32_t a = s0[l], b = s1[l], c = s2[l];
      if (is_nan32(a) || is_nan32(b) || is_nan32(c)) { d[l] = vmin32(vmin32(a, b, ieee), c, ieee); return; }
      uint32_t mx = vmax32(vmax32(a, b, ieee), c, ieee);
      if (mx == a) d[l] = vmax32(b, c, ieee); else if (mx == b) d[l] = vmax32(a, c, ieee); else d[l] = vmax32(a, b, ieee); }); break;
    case 471: lanes(m, [&](int l) { int32_t a = s0[l], b = s1[l], c = s2[l]; d[l] = (uint32_t)std::max(std::min(a, b), std::min(std::max(a, b), c)); }); break;
    case 472: lanes(m, [&](int l) { uint32_t a = s0[l], b = s1[l], c = s2[l]; d[l] = std::max(std::min(a, b), std::min(std::max(a, b), c)); }); break;
    case 476: lanes(m, [&](int l) { d[l] = (s0[l] > s1[l] ? s0[l] - s1[l] : s1[l] - s0[l]) + s2[l]; }); break;  // v_sad_u32
    // v_div_fixup_f32/f64 follow the ISA pseudocode, except that a NaN quotient estimate in the final
    // branch gives the signed infinity: the estimate is NaN exactly when the scaled quotient overflowed
    // (inf - inf inside the Newton steps), and the compiler's IEEE division sequence must return
    // +-inf there. (Deviation from the pseudocode text; tested end to end against IEEE division.)
    case 478: lanes(m, [&](int l) {  // v_div_fixup_f32
      uint32_t a = s0[l], b = s1[l], c = s2[l];
      bool so = ((b ^ c) >> 31) & 1;
      float fb = F(b), fc = F(c);
      uint32_t r;
      if (is_nan32(c)) r = quiet32(c);
      else if (is_nan32(b)) r = quiet32(b);
      else if (fb == 0 && fc == 0) r = 0xffc00000u;
      else if (std::isinf(fb) && std::isinf(fc)) r = 0xffc00000u;
      else if (fb == 0 || std::isinf(fc)) r = so ? 0xff800000u : 0x7f800000u;
      else if (std::isinf(fb) || fc == 0) r = so ? 0x80000000u : 0u;
      else if (exponent32(c) - exponent32(b) < -150) r = so ? 0x80000000u : 0u;   // underflow
      else if (exponent32(b) == 255) r = so ? 0xff800000u : 0x7f800000u;
      else if (is_nan32(a)) r = so ? 0xff800000u : 0x7f800000u;  // see note on v_div_fixup below
      else r = (a & 0x7fffffffu) | (so ? 0x80000000u : 0u);
      d[l] = r; }); break;
    case 482: { uint64_t vcc = w.vcc(); lanes(m, [&](int l) {  // v_div_fmas_f32
      // When div_scale scaled the operands (VCC), undo it: the ISA pseudocode's factor (2^32) does not
      // match div_scale's 2^64; following the fdiv expansion the quotient estimate S2 tells the
      // direction: a large estimate came from a denominator scaled up (x 2^64), a small one from a
      // numerator scaled up (x 2^-64). (UNVERIFIED on hardware; VCC is only set for extreme ranges.)
      float r = std::fmaf(F(s0[l]), F(s1[l]), F(s2[l]));
      if (vcc >> l & 1) r = std::ldexp(r, exponent32(s2[l]) > 127 ? 64 : -64);
      d[l] = B(r); }); break; }
    case 483: { uint64_t vcc = w.vcc(); SR a1 = hi64(0), b1 = hi64(1), c1 = hi64(2);  // v_div_fmas_f64
      lanes(m, [&](int l) {
        uint64_t c = mk64(s2[l], c1[l]);
        double r = std::fma(D(mk64(s0[l], a1[l])), D(mk64(s1[l], b1[l])), D(c));
        if (vcc >> l & 1) r = std::ldexp(r, (int)((c >> 52) & 0x7ff) > 1023 ? 128 : -128);
        uint64_t u = BD(r); d[l] = (uint32_t)u; d1[l] = (uint32_t)(u >> 32); }); break; }
    case 479: { SR a1 = hi64(0), b1 = hi64(1), c1 = hi64(2);  // v_div_fixup_f64 (ISA pseudocode)
      lanes(m, [&](int l) {
        uint64_t a = mk64(s0[l], a1[l]), b = mk64(s1[l], b1[l]), c = mk64(s2[l], c1[l]);
        bool so = ((b ^ c) >> 63) & 1;
        double fb = D(b), fc = D(c);
        int eb = (int)((b >> 52) & 0x7ff), ec = (int)((c >> 52) & 0x7ff);
        uint64_t r;
        if (std::isnan(fc)) r = c | 0x8000000000000ull;
        else if (std::isnan(fb)) r = b | 0x8000000000000ull;
        else if (fb == 0 && fc == 0) r = 0xfff8000000000000ull;
        else if (std::isinf(fb) && std::isinf(fc)) r = 0xfff8000000000000ull;
        else if (fb == 0 || std::isinf(fc)) r = so ? 0xfff0000000000000ull : 0x7ff0000000000000ull;
        else if (std::isinf(fb) || fc == 0) r = so ? 0x8000000000000000ull : 0;
        else if (ec - eb < -1075) r = so ? 0x8000000000000000ull : 0;
        else if (eb == 2047) r = so ? 0xfff0000000000000ull : 0x7ff0000000000000ull;
        else if (std::isnan(D(a))) r = so ? 0xfff0000000000000ull : 0x7ff0000000000000ull;
        else r = (a & 0x7fffffffffffffffull) | (so ? 0x8000000000000000ull : 0);
        d[l] = (uint32_t)r; d1[l] = (uint32_t)(r >> 32); }); break; }
    case 481: {  // v_div_scale_f64 (VOP3SD, ISA pseudocode)
      SR a1 = hi64(0), b1 = hi64(1), c1 = hi64(2);
      uint64_t vcc = 0;
      lanes(m, [&](int l) {
        uint64_t ua = mk64(s0[l], a1[l]), ub = mk64(s1[l], b1[l]), uc = mk64(s2[l], c1[l]);
        double a = D(ua), b = D(ub), c = D(uc), r = a;
        int eb = (int)((ub >> 52) & 0x7ff), ec = (int)((uc >> 52) & 0x7ff);
        auto den = [](double x) { return std::fpclassify(x) == FP_SUBNORMAL; };
        if (c == 0.0 || b == 0.0) r = std::nan("");
        else if (ec - eb >= 768) { vcc |= 1ull << l; if (a == b) r = std::ldexp(a, 128); }
        else if (den(b)) r = std::ldexp(a, 128);
        // pseudocode text: ldexp(S0, 128) here; scaling a denominator whose reciprocal is denormal UP
        // overflows it, so we scale it down (as the next branch does) and let VCC rescale the
        // quotient by 2^-128 in v_div_fmas_f64 (UNVERIFIED; checked end to end against IEEE division)
        else if (den(1.0 / b) && den(c / b)) { vcc |= 1ull << l; if (a == b) r = std::ldexp(a, -128); }
        else if (den(1.0 / b)) r = std::ldexp(a, -128);
        else if (den(c / b)) { vcc |= 1ull << l; if (a == c) r = std::ldexp(a, 128); }
        else if (ec <= 53) r = std::ldexp(a, 128);
        uint64_t u = BD(r); d[l] = (uint32_t)u; d1[l] = (uint32_t)(u >> 32);
      });
      sw64(w, in.sdst, vcc); break;
    }
    case 368: { SR a1 = hi64(0); lanes(m, [&](int l) { double v = D(mk64(s0[l], a1[l])); int e = 0; if (std::isfinite(v) && v != 0) std::frexp(v, &e); d[l] = (uint32_t)e; }); break; }
    case 369: { SR a1 = hi64(0); lanes(m, [&](int l) { uint64_t u = mk64(s0[l], a1[l]); double v = D(u); int e;
      uint64_t r = std::isfinite(v) ? BD(std::frexp(v, &e)) : u; d[l] = (uint32_t)r; d1[l] = (uint32_t)(r >> 32); }); break; }
    case 370: { SR a1 = hi64(0); lanes(m, [&](int l) { double v = D(mk64(s0[l], a1[l]));
      double r = std::isinf(v) ? std::nan("") : std::isnan(v) ? v : std::min(v - std::floor(v), 0x1.fffffffffffffp-1);
      uint64_t u = BD(r); d[l] = (uint32_t)u; d1[l] = (uint32_t)(u >> 32); }); break; }
    case 493: lanes(m, [&](int l) { uint64_t data = mk64(s1[l], s0[l]); uint32_t sel = s2[l], r = 0;
      for (int b = 0; b < 4; b++) r |= (uint32_t)byte_perm(data, sel >> (8 * b)) << (8 * b);
      d[l] = r; }); break;
    case 497: lanes(m, [&](int l) { d[l] = (s0[l] & 0xffff) * (s1[l] & 0xffff) + s2[l]; }); break;
    case 498: lanes(m, [&](int l) { d[l] = (uint32_t)((int32_t)(int16_t)s0[l] * (int32_t)(int16_t)s1[l]) + s2[l]; }); break;
    case 499: lanes(m, [&](int l) { d[l] = (s0[l] ^ s1[l]) + s2[l]; }); break;
    case 509: lanes(m, [&](int l) { d[l] = (s0[l] << (s1[l] & 31)) + s2[l]; }); break;
    case 510: lanes(m, [&](int l) { d[l] = (s0[l] + s1[l]) << (s2[l] & 31); }); break;
    case 511: lanes(m, [&](int l) { d[l] = s0[l] + s1[l] + s2[l]; }); break;
    case 512: lanes(m, [&](int l) { d[l] = (s0[l] << (s1[l] & 31)) | s2[l]; }); break;
    case 513: lanes(m, [&](int l) { d[l] = (s0[l] & s1[l]) | s2[l]; }); break;
    case 514: lanes(m, [&](int l) { d[l] = s0[l] | s1[l] | s2[l]; }); break;
    case 518: f16_zero_hi = true; lanes(m, [&](int l) { d[l] = f2h((float)std::fma((double)h2f(s0[l]), (double)h2f(s1[l]), (double)h2f(s2[l]))); }); break;
    case 520: { SR a1 = vs(w, in, 0, 1), c1 = vs(w, in, 2, 1);  // v_lshl_add_u64
      lanes(m, [&](int l) { uint64_t r = (mk64(s0[l], a1[l]) << (s1[l] & 63)) + mk64(s2[l], c1[l]); d[l] = (uint32_t)r; d1[l] = (uint32_t)(r >> 32); }); break; }
    case 563: {  // v_bitop3_b16 (gfx950): as b32 on the low halves; op_sel picks halves, high half of D as other 16-bit ops
      uint32_t tt = ((uint32_t)in.omod << 6) | ((uint32_t)in.abs << 3) | in.neg;
      SR r0 = vs(w, in, 0), r1 = vs(w, in, 1), r2 = vs(w, in, 2);
      f16_zero_hi = true;
      // sources raw (ABS/NEG hold the table, not modifiers), op_sel[i] takes the high half of source i
      const int sh0 = (in.opsel & 1) ? 16 : 0, sh1 = (in.opsel & 2) ? 16 : 0, sh2 = (in.opsel & 4) ? 16 : 0;
      lanes(m, [&](int l) { uint32_t a = r0[l] >> sh0, b = r1[l] >> sh1, c = r2[l] >> sh2, r = 0;
        for (int i = 0; i < 8; i++) if (tt >> i & 1) r |= ((i & 4) ? a : ~a) & ((i & 2) ? b : ~b) & ((i & 1) ? c : ~c);
        d[l] = r & 0xffffu; }); goto done_nomod; }
    case 564: {  // v_bitop3_b32 (gfx950): TTBL = {OMOD[1:0], ABS[2:0], NEG[2:0]}
      uint32_t tt = ((uint32_t)in.omod << 6) | ((uint32_t)in.abs << 3) | in.neg;
      SR r0 = vs(w, in, 0), r1 = vs(w, in, 1), r2 = vs(w, in, 2);
      lanes(m, [&](int l) { uint32_t a = r0[l], b = r1[l], c = r2[l], r = 0;
        for (int i = 0; i < 8; i++) if (tt >> i & 1) r |= ((i & 4) ? a : ~a) & ((i & 2) ? b : ~b) & ((i & 1) ? c : ~c);
        d[l] = r; }); goto done_nomod; }
    case 615: lanes(m, [&](int l) { d[l] = f2h(F(s0[l])) | (f2h(F(s1[l])) << 16); }); break;  // v_cvt_pk_f16_f32
    case 616: lanes(m, [&](int l) { d[l] = (uint32_t)num::f32_to_bf16_rne(F(s0[l])) | ((uint32_t)num::f32_to_bf16_rne(F(s1[l])) << 16); }); break;
    case 662: lanes(m, [&](int l) { d[l] = num::f32_to_f16_rtz(F(s0[l])) | ((uint32_t)num::f32_to_f16_rtz(F(s1[l])) << 16); }); break;
    case 663: lanes(m, [&](int l) { d[l] = (std::min(s0[l], 65535u)) | (std::min(s1[l], 65535u) << 16); }); break;
    case 664: lanes(m, [&](int l) { auto c = [](int32_t v) { return (uint32_t)(std::min(32767, std::max(-32768, v)) & 0xffff); }; d[l] = c((int32_t)s0[l]) | (c((int32_t)s1[l]) << 16); }); break;
    case 672: lanes(m, [&](int l) { d[l] = (s0[l] & 0xffff) | (s1[l] << 16); }); break;  // v_pack_b32_f16
    case 674: case 675: {  // v_cvt_pk_fp8_f32 / v_cvt_pk_bf8_f32 (preserve the other half)
      num::Fmt f = op == 674 ? num::fp8_fmt(gfx950) : num::bf8_fmt(gfx950);
      bool hi = in.opsel & 8; bool sat = in.clamp;
      uint32_t* dv = dfinal;
      lanes(m, [&](int l) { uint32_t pk = num::encode(f, F(s0[l]), sat) | (num::encode(f, F(s1[l]), sat) << 8);
        dv[l] = hi ? ((dv[l] & 0xffffu) | (pk << 16)) : ((dv[l] & 0xffff0000u) | pk); });
      return;
    }
    case 676: case 677: {  // v_cvt_sr_fp8_f32 / v_cvt_sr_bf8_f32: byte select op_sel[3:2]
      num::Fmt f = op == 676 ? num::fp8_fmt(gfx950) : num::bf8_fmt(gfx950);
      int byte = (in.opsel >> 2) & 3; bool sat = in.clamp; int sh = op == 676 ? 12 : 11;
      uint32_t* dv = dfinal;
      lanes(m, [&](int l) { uint32_t c = num::encode(f, num::sr_perturb(F(s0[l]), s1[l], sh), sat);
        dv[l] = (dv[l] & ~(0xffu << (8 * byte))) | (c << (8 * byte)); });
      return;
    }
    case 399: f16_zero_hi = true; lanes(m, [&](int l) {  // v_sat_pk_u8_i16
      auto sat8 = [](int16_t n) -> uint32_t { return n <= 0 ? 0u : n >= 255 ? 255u : (uint32_t)n; };
      d[l] = sat8((int16_t)s0[l]) | (sat8((int16_t)(s0[l] >> 16)) << 8); }); break;
    case 408: lanes(m, [&](int l) { uint32_t v = s0[l]; d[l] = (v << 1) ^ ((v >> 31) ? 197u : 0u); }); break;  // v_prng_b32
    case 680: case 681: lanes(m, [&](int l) {  // v_minimum3/maximum3_f32: IEEE 754-2019 (NaN propagates, -0 < +0)
      auto mm = [&](uint32_t a, uint32_t b) -> uint32_t {
        if (is_nan32(a)) return quiet32(a);
        if (is_nan32(b)) return quiet32(b);
        float x = F(a), y = F(b);
        if (x == y) return (op == 680) == bool(a >> 31) ? a : b;  // equal (incl. +-0): minimum picks -0
        return (op == 680) == (x < y) ? a : b; };
      d[l] = mm(mm(s0[l], s1[l]), s2[l]); }); break;
    case 500: case 503: case 506: f16_zero_hi = true; lanes(m, [&](int l) {  // v_min3/max3/med3_f16
      float a = h2f(s0[l]), b = h2f(s1[l]), c = h2f(s2[l]), r;
      if (op == 500) r = std::fmin(std::fmin(a, b), c);
      else if (op == 503) r = std::fmax(std::fmax(a, b), c);
      else if (std::isnan(a) || std::isnan(b) || std::isnan(c)) r = std::fmin(std::fmin(a, b), c);
      else { float mx = std::fmax(std::fmax(a, b), c); r = mx == a ? std::fmax(b, c) : mx == b ? std::fmax(a, c) : std::fmax(a, b); }
      d[l] = f2h(r); }); break;
    case 501: case 504: case 507: f16_zero_hi = true; lanes(m, [&](int l) {  // v_min3/max3/med3_i16
      int16_t a = (int16_t)s0[l], b = (int16_t)s1[l], c = (int16_t)s2[l];
      int r = op == 501 ? std::min({a, b, c}) : op == 504 ? std::max({a, b, c}) : std::max(std::min(a, b), std::min(std::max(a, b), c));
      d[l] = (uint32_t)r & 0xffff; }); break;
    case 502: case 505: case 508: f16_zero_hi = true; lanes(m, [&](int l) {  // v_min3/max3/med3_u16
      uint32_t a = s0[l] & 0xffff, b = s1[l] & 0xffff, c = s2[l] & 0xffff;
      d[l] = op == 502 ? std::min({a, b, c}) : op == 505 ? std::max({a, b, c}) : std::max(std::min(a, b), std::min(std::max(a, b), c)); }); break;
    case 516: f16_zero_hi = true; lanes(m, [&](int l) { d[l] = ((s0[l] & 0xffff) * (s1[l] & 0xffff) + s2[l]) & 0xffff; }); break;  // v_mad_u16
    case 517: f16_zero_hi = true; lanes(m, [&](int l) { d[l] = (uint32_t)((int16_t)s0[l] * (int16_t)s1[l] + (int16_t)s2[l]) & 0xffff; }); break;  // v_mad_i16
    case 670: f16_zero_hi = true; lanes(m, [&](int l) { d[l] = (s0[l] + s1[l]) & 0xffff; }); break;  // v_add_i16
    case 671: f16_zero_hi = true; lanes(m, [&](int l) { d[l] = (s0[l] - s1[l]) & 0xffff; }); break;  // v_sub_i16
    case 640: case 641: case 642: case 643: { SR a1 = hi64(0), b1 = hi64(1);
      lanes(m, [&](int l) { double a = D(mk64(s0[l], a1[l])), b = D(mk64(s1[l], b1[l]));
        double r = op == 640 ? a + b : op == 641 ? a * b : op == 642 ? dmin(a, b) : dmax(a, b);
        uint64_t u = BD(r); d[l] = (uint32_t)u; d1[l] = (uint32_t)(u >> 32); }); break; }
    case 644: { SR a1 = hi64(0); lanes(m, [&](int l) { uint64_t u = BD(std::ldexp(D(mk64(s0[l], a1[l])), (int32_t)s1[l])); d[l] = (uint32_t)u; d1[l] = (uint32_t)(u >> 32); }); break; }
    case 645: lanes(m, [&](int l) { d[l] = s0[l] * s1[l]; }); break;
    case 646: lanes(m, [&](int l) { d[l] = (uint32_t)(((uint64_t)s0[l] * s1[l]) >> 32); }); break;
    case 647: lanes(m, [&](int l) { d[l] = (uint32_t)(((int64_t)(int32_t)s0[l] * (int32_t)s1[l]) >> 32); }); break;
    case 648: lanes(m, [&](int l) { d[l] = B(std::ldexp(F(s0[l]), (int32_t)s1[l])); }); break;
    case 651: lanes(m, [&](int l) { d[l] = __builtin_popcount(s0[l]) + s1[l]; }); break;
    case 652: lanes(m, [&](int l) { uint64_t tm = (1ull << l) - 1; d[l] = s1[l] + __builtin_popcount(s0[l] & (uint32_t)tm); }); break;
    case 653: lanes(m, [&](int l) { uint64_t tm = (1ull << l) - 1; d[l] = s1[l] + __builtin_popcount(s0[l] & (uint32_t)(tm >> 32)); }); break;
    case 655: { SR b1 = vs(w, in, 1, 1); lanes(m, [&](int l) { uint64_t r = mk64(s1[l], b1[l]) << (s0[l] & 63); d[l] = (uint32_t)r; d1[l] = (uint32_t)(r >> 32); }); break; }
    case 656: { SR b1 = vs(w, in, 1, 1); lanes(m, [&](int l) { uint64_t r = mk64(s1[l], b1[l]) >> (s0[l] & 63); d[l] = (uint32_t)r; d1[l] = (uint32_t)(r >> 32); }); break; }
    case 657: { SR b1 = vs(w, in, 1, 1); lanes(m, [&](int l) { uint64_t r = (uint64_t)((int64_t)mk64(s1[l], b1[l]) >> (s0[l] & 63)); d[l] = (uint32_t)r; d1[l] = (uint32_t)(r >> 32); }); break; }
    case 659: lanes(m, [&](int l) { d[l] = ((1u << (s0[l] & 31)) - 1) << (s1[l] & 31); }); break;
    case 480: {  // v_div_scale_f32 (VOP3SD)
      uint64_t vcc = 0;
      lanes(m, [&](int l) {
        float a = F(s0[l]), b = F(s1[l]), c = F(s2[l]);
        float r = a;
        int eb = exponent32(s1[l]), ec = exponent32(s2[l]);
        if ((double)c == 0.0 || (double)b == 0.0) r = std::nanf("");
        else if (ec - eb >= 96) { vcc |= 1ull << l; if (a == b) r = std::ldexp(a, 64); }
        else if (eb == 0 && (s1[l] & 0x7fffff)) r = std::ldexp(a, 64);
        else if (std::fpclassify(1.0 / (double)b) == FP_SUBNORMAL && std::fpclassify(c / b) == FP_SUBNORMAL) { vcc |= 1ull << l; if (a == b) r = std::ldexp(a, 64); }
        else if (std::fpclassify(1.0 / (double)b) == FP_SUBNORMAL) r = std::ldexp(a, -64);
        else if (std::fpclassify(c / b) == FP_SUBNORMAL) { vcc |= 1ull << l; if (a == c) r = std::ldexp(a, 64); }
        else if (ec <= 23) r = std::ldexp(a, 64);
        d[l] = B(r);
      });
      sw64(w, in.sdst, vcc); break;
    }
    case 488: case 489: { SR c1 = vs(w, in, 2, 1);  // v_mad_u64_u32 / v_mad_i64_i32
      uint64_t carry = 0;
      lanes(m, [&](int l) {
        uint64_t c = mk64(s2[l], c1[l]), r;
        if (op == 488) { unsigned __int128 t = (unsigned __int128)s0[l] * s1[l] + c; r = (uint64_t)t; if (t >> 64) carry |= 1ull << l; }
        else { __int128 t = (__int128)(int64_t)(int32_t)s0[l] * (int32_t)s1[l] + (__int128)(int64_t)c; r = (uint64_t)t; if (t != (__int128)(int64_t)r) carry |= 1ull << l; }
        d[l] = (uint32_t)r; d1[l] = (uint32_t)(r >> 32); });
      sw64(w, in.sdst, carry); break;
    }
    default:
      unsupported(w, "unsupported VALU opcode " + in.row->name);
  }
  // ---- output modifiers (f32 results)
  if (in.omod || in.clamp) {
    const std::string df = in.row ? in.row->fmt("vdst") : "";
    if (df == "F32") {
      lanes(m, [&](int l) {
        float v = F(d[l]);
        if (in.omod == 1) v *= 2.0f; else if (in.omod == 2) v *= 4.0f; else if (in.omod == 3) v *= 0.5f;
        if (in.clamp) v = std::isnan(v) ? 0.0f : std::min(1.0f, std::max(0.0f, v));
        d[l] = B(v);
      });
    } else if (df == "F16" && !in.omod) {
      lanes(m, [&](int l) { float v = h2f(d[l]); v = std::isnan(v) ? 0.0f : std::min(1.0f, std::max(0.0f, v)); d[l] = f2h(v); });
    } else if (in.clamp && op != 674 && op != 675) {
      unsupported(w, "clamp/omod on a non-f32 result is not modelled");
    }
  }
done_nomod:
  if (opsel_hi_dst) {
    lanes(m, [&](int l) { dfinal[l] = (dfinal[l] & 0xffffu) | (d[l] << 16); });
  } else if (sdwa_dst) {
    int sel = in.dst_sel;
    lanes(m, [&](int l) {
      uint32_t v = d[l], old = dfinal[l], r;
      int sh = sel <= 3 ? 8 * sel : 16 * (sel - 4);
      uint32_t msk = (sel <= 3 ? 0xffu : 0xffffu) << sh;
      uint32_t ins = (v << sh) & msk;
      if (in.dst_unused == 2) r = (old & ~msk) | ins;
      else if (in.dst_unused == 1) { int top = sh + (sel <= 3 ? 8 : 16); r = ins; if (top < 32 && ((ins >> (top - 1)) & 1)) r |= ~0u << top; }
      else r = ins;
      dfinal[l] = r;
    });
  } else if (f16_zero_hi && d) {
    lanes(m, [&](int l) { d[l] &= 0xffffu; });
  }
}

// ============================================================================ gfx950 v_cvt_scalef32_*
// Pseudocode (CDNA4): the scale is the biased exponent of an f32 operand; conversions to a narrow
// format divide by 2^(scale-127) and round (RNE), conversions from it multiply. op_sel selects
// source/destination bytes or words, other destination bits are preserved. Element math:
// numerics.hpp (scaled_encode / scaled_decode). Overflow policy as for v_cvt_pk_fp8_f32 (clamp bit).
bool Ctx::exec_scalef32(Wave& w, const Inst& in, int op, uint64_t m) {
  using num::Fmt;
  const Fmt fp8 = num::fp8_fmt(true), bf8 = num::bf8_fmt(true), fp4 = Fmt::E2M1;
  SR s0 = vs(w, in, 0), s1 = vs(w, in, 1);
  SR s2 = in.src[2] != OPC_NONE ? vs(w, in, 2) : SR{nullptr, 0};
  uint32_t* d = w.row(in.dst);
  uint32_t* d1 = d + 64;
  const bool sat = in.clamp;
  const int os = in.opsel;
  auto put16 = [&](int l, uint32_t v, int word) { d[l] = (d[l] & ~(0xffffu << (16 * word))) | ((v & 0xffff) << (16 * word)); };
  auto put8 = [&](int l, uint32_t v, int byte) { d[l] = (d[l] & ~(0xffu << (8 * byte))) | ((v & 0xff) << (8 * byte)); };
  auto h2 = [&](uint32_t v, bool bf, int i) -> float { uint32_t h = (v >> (16 * i)) & 0xffff; return bf ? num::bf16_to_f32((uint16_t)h) : h2f(h); };
  switch (op) {
    case 565: case 566: {  // pk_fp8/bf8_f32: S0, S1 -> word op_sel[3]; scale S2
      Fmt f = op == 565 ? fp8 : bf8;
      lanes(m, [&](int l) { put16(l, num::scaled_encode(f, F(s0[l]), s2[l], sat) | (num::scaled_encode(f, F(s1[l]), s2[l], sat) << 8), (os >> 3) & 1); });
      return true;
    }
    case 567: case 568: {  // sr_fp8/bf8_f32: S0 with random S1 -> byte op_sel[3:2]; scale S2
      Fmt f = op == 567 ? fp8 : bf8; int sh = op == 567 ? 12 : 11;
      lanes(m, [&](int l) { put8(l, num::scaled_encode(f, num::sr_perturb(F(s0[l]), s1[l], sh), s2[l], sat), (os >> 2) & 3); });
      return true;
    }
    case 569: case 570: {  // pk_f32_fp8/bf8: word op_sel[0] of S0; scale S1
      Fmt f = op == 569 ? fp8 : bf8;
      SR raw = vs(w, in, 0);
      lanes(m, [&](int l) { uint32_t t = raw[l] >> (16 * (os & 1));
        d[l] = B((float)num::scaled_decode(f, t & 0xff, s1[l])); d1[l] = B((float)num::scaled_decode(f, (t >> 8) & 0xff, s1[l])); });
      return true;
    }
    case 571: case 572: {  // f32_fp8/bf8: byte op_sel[1:0]
      Fmt f = op == 571 ? fp8 : bf8;
      lanes(m, [&](int l) { d[l] = B((float)num::scaled_decode(f, (s0[l] >> (8 * (os & 3))) & 0xff, s1[l])); });
      return true;
    }
    case 573: {  // pk_fp4_f32: S0, S1 -> byte op_sel[3:2] {hi nibble S1, lo nibble S0}; scale S2
      lanes(m, [&](int l) { put8(l, num::scaled_encode(fp4, F(s0[l]), s2[l], true) | (num::scaled_encode(fp4, F(s1[l]), s2[l], true) << 4), (os >> 2) & 3); });
      return true;
    }
    case 575: {  // pk_f32_fp4: byte op_sel[1:0] of S0; scale S1
      lanes(m, [&](int l) { uint32_t b = (s0[l] >> (8 * (os & 3))) & 0xff;
        d[l] = B((float)num::scaled_decode(fp4, b & 0xf, s1[l])); d1[l] = B((float)num::scaled_decode(fp4, b >> 4, s1[l])); });
      return true;
    }
    case 576: case 577: case 580: case 581: {  // pk_fp8/bf8 from packed f16/bf16 S0 -> word op_sel[3]; scale S1
      Fmt f = (op == 576 || op == 580) ? fp8 : bf8; bool bf = op >= 580;
      lanes(m, [&](int l) { put16(l, num::scaled_encode(f, h2(s0[l], bf, 0), s1[l], sat) | (num::scaled_encode(f, h2(s0[l], bf, 1), s1[l], sat) << 8), (os >> 3) & 1); });
      return true;
    }
    case 584: case 585: case 617: case 618: {  // pk_f16/bf16 from fp8/bf8: word op_sel[0] of S0; scale S1
      Fmt f = (op == 584 || op == 617) ? fp8 : bf8; bool bf = op >= 617;
      SR raw = vs(w, in, 0);
      lanes(m, [&](int l) { uint32_t t = raw[l] >> (16 * (os & 1)); uint32_t r = 0;
        for (int i = 0; i < 2; i++) { float v = (float)num::scaled_decode(f, (t >> (8 * i)) & 0xff, s1[l]);
          r |= (bf ? (uint32_t)num::f32_to_bf16_rne(v) : f2h(v)) << (16 * i); }
        d[l] = r; });
      return true;
    }
    case 588: case 589: {  // pk_fp4 from packed f16/bf16 S0 -> byte op_sel[3:2]; scale S1
      bool bf = op == 589;
      lanes(m, [&](int l) { put8(l, num::scaled_encode(fp4, h2(s0[l], bf, 0), s1[l], true) | (num::scaled_encode(fp4, h2(s0[l], bf, 1), s1[l], true) << 4), (os >> 2) & 3); });
      return true;
    }
    case 592: case 593: {  // pk_f16/bf16 from fp4: byte op_sel[1:0] of S0; scale S1
      bool bf = op == 593;
      lanes(m, [&](int l) { uint32_t b = (s0[l] >> (8 * (os & 3))) & 0xff; uint32_t r = 0;
        for (int i = 0; i < 2; i++) { float v = (float)num::scaled_decode(fp4, (b >> (4 * i)) & 0xf, s1[l]);
          r |= (bf ? (uint32_t)num::f32_to_bf16_rne(v) : f2h(v)) << (16 * i); }
        d[l] = r; });
      return true;
    }
  }
  return false;
}

// ============================================================================ VOP3P (packed math, dot, mix)
void Ctx::exec_vop3p(Wave& w, const Inst& in, const XInst& x) {
  (void)x;
  const int op = in.op;
  uint64_t m = w.exec();
  uint32_t* d = w.row(in.dst);
  if (op == 88 || op == 89) {  // v_accvgpr_read/write
    SR a = vs(w, in, 0);
    lanes(m, [&](int l) { d[l] = a[l]; });
    return;
  }
  SR s0 = vs(w, in, 0), s1 = in.src[1] != OPC_NONE ? vs(w, in, 1) : SR{nullptr, 0}, s2 = in.src[2] != OPC_NONE ? vs(w, in, 2) : SR{nullptr, 0};
  const uint8_t os = in.opsel, oh = in.opsel_hi, ng = in.neg, nh = in.neg_hi;
  auto h16 = [&](SR& s, int i, int l, bool hi) -> uint32_t {  // selected 16-bit half of source i for result half `hi`
    uint32_t v = s[l];
    bool sel = hi ? (oh >> i & 1) : (os >> i & 1);
    return sel ? v >> 16 : v & 0xffff;
  };
  auto nf16 = [&](uint32_t v, int i, bool hi) -> float { float f = h2f(v); if ((hi ? nh : ng) >> i & 1) f = -f; return f; };
  switch (op) {
    case 14: case 15: case 16: case 17: case 18: {  // v_pk_fma/add/mul/min/max_f16
      lanes(m, [&](int l) {
        uint32_t r = 0;
        for (int h = 0; h < 2; h++) {
          float a = nf16(h16(s0, 0, l, h), 0, h), b = nf16(h16(s1, 1, l, h), 1, h);
          float v;
          if (op == 14) { float c = nf16(h16(s2, 2, l, h), 2, h); v = (float)std::fma((double)a, (double)b, (double)c); }
          else if (op == 15) v = a + b; else if (op == 16) v = a * b; else if (op == 17) v = std::fmin(a, b); else v = std::fmax(a, b);
          if (in.clamp) v = std::isnan(v) ? 0.f : std::min(1.f, std::max(0.f, v));
          r |= f2h(v) << (16 * h);
        }
        d[l] = r; });
      return;
    }
    case 0: case 1: case 2: case 3: case 4: case 5: case 6: case 7: case 8: case 9: case 10: case 11: case 12: case 13: {
      lanes(m, [&](int l) {
        uint32_t r = 0;
        for (int h = 0; h < 2; h++) {
          uint32_t a = h16(s0, 0, l, h), b = h16(s1, 1, l, h), c = s2.p ? h16(s2, 2, l, h) : 0, v = 0;
          int16_t sa = (int16_t)a, sb = (int16_t)b;
          switch (op) {
            case 0: v = (uint32_t)(sa * sb + (int16_t)c); break;
            case 1: v = a * b; break;
            case 2: v = a + b; break;
            case 3: v = a - b; break;
            case 4: v = b << (a & 15); break;
            case 5: v = b >> (a & 15); break;
            case 6: v = (uint32_t)(sb >> (a & 15)); break;
            case 7: v = (uint32_t)std::max(sa, sb); break;
            case 8: v = (uint32_t)std::min(sa, sb); break;
            case 9: v = a * b + c; break;
            case 10: v = a + b; break;
            case 11: v = a - b; break;
            case 12: v = std::max(a, b); break;
            case 13: v = std::min(a, b); break;
          }
          r |= (v & 0xffff) << (16 * h);
        }
        d[l] = r; });
      return;
    }
    case 48: case 49: case 50: case 51: {  // v_pk_fma/mul/add_f32, v_pk_mov_b32 (64-bit operands)
      SR a1 = vs(w, in, 0, 1), b1 = vs(w, in, 1, 1), c1 = s2.p ? vs(w, in, 2, 1) : SR{nullptr, 0};
      uint32_t* d1 = d + 64;
      if (op == 48 && !ng && !nh && !in.clamp) {
        // D.lo = fma(sel(A), sel(B), sel(C)) with op_sel, D.hi with op_sel_hi; outputs staged (D may alias)
        const uint32_t* lo[3] = {(os & 1) ? a1.p : s0.p, (os & 2) ? b1.p : s1.p, (os & 4) ? c1.p : s2.p};
        const uint32_t* hi[3] = {(oh & 1) ? a1.p : s0.p, (oh & 2) ? b1.p : s1.p, (oh & 4) ? c1.p : s2.p};
        uint32_t* tlo = w.dtmp[0]; uint32_t* thi = w.dtmp[1];
        fma_lanes(~0ull, tlo, lo[0], lo[1], lo[2]);
        fma_lanes(~0ull, thi, hi[0], hi[1], hi[2]);
        lanes(m, [&](int l) { d[l] = tlo[l]; d1[l] = thi[l]; });
        return;
      }
      lanes(m, [&](int l) {
        uint32_t lo, hi;
        if (op == 51) {
          lo = (os & 1) ? a1[l] : s0[l];
          hi = (os & 2) ? b1[l] : s1[l];
        } else {
          auto pick = [&](SR& lo_, SR& hi_, int i, bool h) -> float {
            bool sel = h ? (oh >> i & 1) : (os >> i & 1);
            float f = F(sel ? hi_[l] : lo_[l]);
            if ((h ? nh : ng) >> i & 1) f = -f;
            return f;
          };
          float r[2];
          for (int h = 0; h < 2; h++) {
            float a = pick(s0, a1, 0, h), b = pick(s1, b1, 1, h);
            if (op == 48) r[h] = std::fmaf(a, b, pick(s2, c1, 2, h));
            else if (op == 49) r[h] = a * b; else r[h] = a + b;
          }
          lo = B(r[0]); hi = B(r[1]);
        }
        d[l] = lo; d1[l] = hi; });
      return;
    }
    case 38: case 39: case 40: case 41: case 42: case 43: {  // v_dot{2,4,8}_{i32,u32}_{i16/u16, i8/u8, i4/u4}
      int eb = (op <= 39) ? 16 : (op <= 41) ? 8 : 4;
      bool sgn = (op % 2) == 0;
      lanes(m, [&](int l) {
        int64_t acc = sgn ? (int64_t)(int32_t)s2[l] : (int64_t)s2[l];
        for (int i = 0; i < 32 / eb; i++) {
          uint32_t a = (s0[l] >> (eb * i)) & ((1u << eb) - 1), b = (s1[l] >> (eb * i)) & ((1u << eb) - 1);
          int64_t x = a, y = b;
          if (sgn) { x = (int32_t)((uint32_t)a << (32 - eb)) >> (32 - eb); y = (int32_t)((uint32_t)b << (32 - eb)) >> (32 - eb); }
          acc += x * y;
        }
        if (in.clamp) acc = sgn ? std::min<int64_t>(INT32_MAX, std::max<int64_t>(INT32_MIN, acc)) : std::min<int64_t>(UINT32_MAX, std::max<int64_t>(0, acc));
        d[l] = (uint32_t)acc; });
      return;
    }
    case 35: case 26: {  // v_dot2_f32_f16 / v_dot2_f32_bf16: D = A.lo*B.lo + A.hi*B.hi + C
      lanes(m, [&](int l) {
        double acc = F(s2[l]);
        if (ng >> 2 & 1) acc = -acc;
        for (int h = 0; h < 2; h++) {
          uint32_t a = h16(s0, 0, l, h), b = h16(s1, 1, l, h);
          float fa = op == 35 ? h2f(a) : num::bf16_to_f32(a), fb = op == 35 ? h2f(b) : num::bf16_to_f32(b);
          if ((h ? nh : ng) & 1) fa = -fa;
          if ((h ? nh : ng) & 2) fb = -fb;
          acc += (double)fa * fb;
        }
        float v = (float)acc;
        if (in.clamp) v = std::isnan(v) ? 0.f : std::min(1.f, std::max(0.f, v));
        d[l] = B(v); });
      return;
    }
    case 32: case 33: case 34: {  // v_mad_mix_f32 / mixlo_f16 / mixhi_f16
      SR* ss[3] = {&s0, &s1, &s2};
      lanes(m, [&](int l) {
        float v[3];
        for (int i = 0; i < 3; i++) {
          uint32_t raw = (*ss[i])[l];
          if (oh >> i & 1) v[i] = h2f((os >> i & 1) ? raw >> 16 : raw & 0xffff);
          else v[i] = F(raw);
          if (nh >> i & 1) v[i] = std::fabs(v[i]);
          if (ng >> i & 1) v[i] = -v[i];
        }
        float r = std::fmaf(v[0], v[1], v[2]);
        if (in.clamp) r = std::isnan(r) ? 0.f : std::min(1.f, std::max(0.f, r));
        if (op == 32) d[l] = B(r);
        else if (op == 33) d[l] = (d[l] & 0xffff0000u) | f2h(r);
        else d[l] = (d[l] & 0xffffu) | (f2h(r) << 16); });
      return;
    }
  }
  unsupported(w, "unsupported VOP3P opcode " + in.row->name);
}

// ============================================================================ MFMA
void Ctx::exec_mfma(Wave& w, const Inst& in, const XInst& x, const uint64_t* sus, uint32_t poison, uint32_t* dout) {
  if (!x.mfma) unsupported(w, "MFMA " + in.row->name + " is not implemented for " + co.arch);
  const MfmaInfo& mi = *x.mfma;
  int na = mfma_a_regs(mi, in.cbsz), nb = mfma_b_regs(mi, in.blgp), nc = mi.cd_regs;
  // the lane checker's run: a copy of the rows with their suspect lanes set to `poison`
  auto poisoned = [&](uint16_t c, int nregs, uint32_t* scratch) -> const uint32_t* {
    const uint32_t* p = w.row(c);
    std::copy(p, p + nregs * 64, scratch);
    for (int r = 0; r < nregs && c - OPC_VGPR + r < 512; r++)
      for (int l = 0; l < 64; l++) if (sus[c - OPC_VGPR + r] >> l & 1) scratch[r * 64 + l] = poison;
    return scratch;
  };
  auto operand = [&](int i, int nregs, uint32_t* scratch) -> const uint32_t* {
    uint16_t c = in.src[i];
    if (c >= OPC_VGPR && c != OPC_NONE) return sus ? poisoned(c, nregs, scratch) : w.row(c);
    uint32_t v = (uint32_t)in.cval[i];
    if (!in.is_const[i]) { if (c < 128) v = w.s[c]; else v = sspecial(w, c); }
    for (int k = 0; k < nregs * 64; k++) scratch[k] = v;
    return scratch;
  };
  static thread_local std::vector<uint32_t> bufA, bufB, bufC, bufS;
  bufA.resize(16 * 64); bufB.resize(16 * 64); bufC.resize(32 * 64); bufS.resize(2 * 64);
  const uint32_t* A = operand(0, na, bufA.data());
  const uint32_t* Bp = operand(1, nb, bufB.data());
  const uint32_t* C = operand(2, nc, bufC.data());
  uint32_t* Dp = dout ? dout : w.row(in.dst);
  // inputs overlapping the destination (other than C == D) are copied first
  auto overlaps = [&](const uint32_t* p, int n) { return p + n * 64 > Dp && p < Dp + nc * 64; };
  if (overlaps(A, na) && A != bufA.data()) { std::copy(A, A + na * 64, bufA.begin()); A = bufA.data(); }
  if (overlaps(Bp, nb) && Bp != bufB.data()) { std::copy(Bp, Bp + nb * 64, bufB.begin()); Bp = bufB.data(); }
  if (C != Dp && overlaps(C, nc) && C != bufC.data()) { std::copy(C, C + nc * 64, bufC.begin()); C = bufC.data(); }
  MfmaOperands ops{};
  ops.a = A; ops.b = Bp; ops.c = C; ops.d = Dp;
  ops.cbsz = in.cbsz; ops.abid = in.abid; ops.blgp = in.blgp; ops.neg = in.neg;
  ops.scale_a = nullptr; ops.scale_b = nullptr;
  if (in.enc == ENC_VOP3PX2) {
    const uint32_t* sp[2];
    for (int i = 0; i < 2; i++) {
      uint16_t c = in.scale_src[i];
      if (c >= OPC_VGPR) sp[i] = sus ? poisoned(c, 1, bufS.data() + i * 64) : w.row(c);
      else {
        uint64_t cv; uint32_t v;
        if (c >= 128 && c <= 192) v = c - 128; else if (c >= 193 && c <= 208) v = (uint32_t)-(int)(c - 192); else if (c < 128) v = w.s[c]; else { (void)cv; v = sspecial(w, c); }
        for (int k = 0; k < 64; k++) bufS[i * 64 + k] = v;
        sp[i] = bufS.data() + i * 64;
      }
    }
    ops.scale_a = sp[0]; ops.scale_b = sp[1];
    ops.scale_a_opsel = in.scale_opsel[0]; ops.scale_b_opsel = in.scale_opsel[1];
  }
  mfma_execute(mi, ops);
}

// ============================================================================ SMEM
void Ctx::exec_smem(Wave& w, const Inst& in) {
  const int op = in.op;
  if (op == 32 || op == 33 || op == 34 || op == 35 || op == 40 || op == 41) return;  // cache control
  if (op == 36 || op == 37) {  // s_memtime / s_memrealtime: a monotonic counter
    memtime += 1000; sw64(w, in.sdst, memtime);
    if (hz) { uint64_t seq = ++w.sm_issued; tag_dst(w, in.sdst, 2, TK_SM, seq); }
    return;
  }
  int n = 0;
  bool buf = false;
  switch (op) {
    case 0: n = 1; break; case 1: n = 2; break; case 2: n = 4; break; case 3: n = 8; break; case 4: n = 16; break;
    case 8: n = 1; buf = true; break; case 9: n = 2; buf = true; break; case 10: n = 4; buf = true; break;
    case 11: n = 8; buf = true; break; case 12: n = 16; buf = true; break;
    default: unsupported(w, "unsupported SMEM opcode " + in.row->name);
  }
  int64_t off = 0;
  if (in.imm) off = in.simm;
  if (in.soffset_en) off += w.s[in.soffset];
  if (!in.imm && !in.soffset_en) off = w.s[in.simm & 0x7f];
  uint32_t tmp[16];
  if (!buf) {
    uint64_t base = mk64(w.s[in.sbase], w.s[in.sbase + 1]);
    uint64_t a = (base + (uint64_t)off) & ~3ull;
    const uint8_t* p = gptr(w, a, 4 * n, false, -1);
    std::memcpy(tmp, p, 4 * n);
  } else {
    uint32_t* r = &w.s[in.sbase];
    uint64_t base = r[0] | ((uint64_t)(r[1] & 0xffff) << 32);
    uint32_t num = r[2];
    for (int i = 0; i < n; i++) {
      uint64_t o = ((uint64_t)off & ~3ull) + 4 * i;
      if (o + 4 > num) { tmp[i] = 0; continue; }  // out of range: 0
      std::memcpy(&tmp[i], gptr(w, base + o, 4, false, -1), 4);
    }
  }
  for (int i = 0; i < n; i++) sw(w, (uint16_t)(in.sdst + i), tmp[i]);
  if (hz) { uint64_t seq = ++w.sm_issued; tag_dst(w, in.sdst, n, TK_SM, seq); }
}

// ============================================================================ DS (LDS)
void Ctx::exec_ds(Wave& w, const Inst& in) {
  const int op = in.op;
  uint64_t m = w.exec();
  if (in.gds) unsupported(w, "GDS is not modelled");
  const uint32_t* addr = in.src[0] != OPC_NONE ? w.row(in.src[0]) : nullptr;
  const uint32_t off16 = in.offset | (in.offset1 << 8);
  uint64_t seq = hz ? ++w.ds_issued : 0;
  uint32_t* dst = in.dst != OPC_NONE ? w.row(in.dst) : nullptr;
  const uint32_t* d0 = in.src[1] != OPC_NONE ? w.row(in.src[1]) : nullptr;
  const uint32_t* d1 = in.src[2] != OPC_NONE ? w.row(in.src[2]) : nullptr;
  if (lc) {  // lane checker: is each lane's store data defined; loads collect their undefined lanes
    lane_ds_undef = 0; lane_ds_orig = -1; lane_st_orig = -1;
    lane_st_def = rows_def(w, in.src[1], nregs_of(in.nbits[1]), m, &lane_st_orig) & rows_def(w, in.src[2], nregs_of(in.nbits[2]), m, &lane_st_orig);
  }
  auto ld = [&](uint32_t a, int n, int lane, void* out) {
    lds_check(w, a, n, false, lane); lds_track(w, a, n, false, 0, 0); std::memcpy(out, lds.data() + a, n); b_lds_rd += (uint64_t)n;
    if (lc) lane_lds_load(a, n, lane);
  };
  auto st = [&](uint32_t a, int n, int lane, const void* src) {
    lds_check(w, a, n, true, lane); lds_track(w, a, n, true, TK_DS, seq); std::memcpy(lds.data() + a, src, n); b_lds_wr += (uint64_t)n;
    if (lc) lane_lds_store(a, n, lane_st_def >> lane & 1, lane_st_orig);
  };
  int nread = 0;  // dst registers written (for hazard tags)
  switch (op) {
    case 13: lanes(m, [&](int l) { st(addr[l] + off16, 4, l, &d0[l]); }); break;
    case 30: lanes(m, [&](int l) { uint8_t v = (uint8_t)d0[l]; st(addr[l] + off16, 1, l, &v); }); break;
    case 31: lanes(m, [&](int l) { uint16_t v = (uint16_t)d0[l]; st(addr[l] + off16, 2, l, &v); }); break;
    case 84: lanes(m, [&](int l) { uint8_t v = (uint8_t)(d0[l] >> 16); st(addr[l] + off16, 1, l, &v); }); break;
    case 85: lanes(m, [&](int l) { uint16_t v = (uint16_t)(d0[l] >> 16); st(addr[l] + off16, 2, l, &v); }); break;
    case 77: case 222: case 223: {
      int n = op == 77 ? 2 : op == 222 ? 3 : 4;
      lanes(m, [&](int l) { uint32_t v[4]; for (int i = 0; i < n; i++) v[i] = d0[i * 64 + l]; st(addr[l] + off16, 4 * n, l, v); });
      break;
    }
    case 14: case 15: {
      uint32_t sc = op == 15 ? 256 : 4;
      lanes(m, [&](int l) { st(addr[l] + in.offset * sc, 4, l, &d0[l]); st(addr[l] + in.offset1 * sc, 4, l, &d1[l]); });
      break;
    }
    case 78: case 79: {
      uint32_t sc = op == 79 ? 512 : 8;
      lanes(m, [&](int l) { uint32_t a[2] = {d0[l], d0[64 + l]}, b[2] = {d1[l], d1[64 + l]};
        st(addr[l] + in.offset * sc, 8, l, a); st(addr[l] + in.offset1 * sc, 8, l, b); });
      break;
    }
    case 54: nread = 1; lanes(m, [&](int l) { ld(addr[l] + off16, 4, l, &dst[l]); }); break;
    case 57: nread = 1; lanes(m, [&](int l) { int8_t v; ld(addr[l] + off16, 1, l, &v); dst[l] = (uint32_t)(int32_t)v; }); break;
    case 58: nread = 1; lanes(m, [&](int l) { uint8_t v; ld(addr[l] + off16, 1, l, &v); dst[l] = v; }); break;
    case 59: nread = 1; lanes(m, [&](int l) { int16_t v; ld(addr[l] + off16, 2, l, &v); dst[l] = (uint32_t)(int32_t)v; }); break;
    case 60: nread = 1; lanes(m, [&](int l) { uint16_t v; ld(addr[l] + off16, 2, l, &v); dst[l] = v; }); break;
    case 86: case 87: case 88: case 89: case 90: case 91: {  // d16 loads
      nread = 1;
      lanes(m, [&](int l) {
        uint32_t v = 0;
        if (op <= 89) { uint8_t b; ld(addr[l] + off16, 1, l, &b); v = (op == 88 || op == 89) ? (uint32_t)(uint16_t)(int16_t)(int8_t)b : b; }
        else { uint16_t h; ld(addr[l] + off16, 2, l, &h); v = h; }
        bool hi = (op == 87 || op == 89 || op == 91);
        dst[l] = hi ? ((dst[l] & 0xffffu) | (v << 16)) : ((dst[l] & 0xffff0000u) | (v & 0xffff));
      });
      break;
    }
    case 118: case 254: case 255: {
      int n = op == 118 ? 2 : op == 254 ? 3 : 4;
      nread = n;
      lanes(m, [&](int l) { uint32_t v[4]; ld(addr[l] + off16, 4 * n, l, v); for (int i = 0; i < n; i++) dst[i * 64 + l] = v[i]; });
      break;
    }
    case 55: case 56: {
      uint32_t sc = op == 56 ? 256 : 4; nread = 2;
      lanes(m, [&](int l) { uint32_t a, b; ld(addr[l] + in.offset * sc, 4, l, &a); ld(addr[l] + in.offset1 * sc, 4, l, &b); dst[l] = a; dst[64 + l] = b; });
      break;
    }
    case 119: case 120: {
      uint32_t sc = op == 120 ? 512 : 8; nread = 4;
      lanes(m, [&](int l) { uint32_t a[2], b[2]; ld(addr[l] + in.offset * sc, 8, l, a); ld(addr[l] + in.offset1 * sc, 8, l, b);
        dst[l] = a[0]; dst[64 + l] = a[1]; dst[128 + l] = b[0]; dst[192 + l] = b[1]; });
      break;
    }
    case 61: {  // ds_swizzle_b32
      nread = 1;
      uint32_t t[64];
      uint64_t e = m;
      for (int l = 0; l < 64; l++) {
        int sl;
        if (off16 & 0x8000) sl = (l & ~3) | ((off16 >> (2 * (l & 3))) & 3);
        else {
          int andm = off16 & 0x1f, orm = (off16 >> 5) & 0x1f, xorm = (off16 >> 10) & 0x1f;
          sl = (l & 0x20) | ((((l & 0x1f) & andm) | orm) ^ xorm);
        }
        t[l] = (e >> sl & 1) ? addr[sl] : 0;  // ds_swizzle's data operand is the ADDR VGPR
      }
      lanes(m, [&](int l) { dst[l] = t[l]; });
      break;
    }
    case 62: {  // ds_permute_b32 (forward)
      nread = 1;
      uint32_t t[64] = {0};
      for (int l = 0; l < 64; l++) if (m >> l & 1) t[((addr[l] + off16) / 4) % 64] = d0[l];
      lanes(m, [&](int l) { dst[l] = t[l]; });
      break;
    }
    case 63: {  // ds_bpermute_b32 (backward)
      nread = 1;
      uint32_t t[64];
      for (int l = 0; l < 64; l++) { int sl = ((addr[l] + off16) / 4) % 64; t[l] = (m >> sl & 1) ? d0[sl] : 0; }
      lanes(m, [&](int l) { dst[l] = t[l]; });
      break;
    }
    // LDS atomics (ISA pseudocode): 32-bit ops 0-21 (returning: +32), 64-bit ops 64-92 (returning: +32).
    // cmpst: compare with DATA, store DATA2. Exempt from the race checker (atomic by definition).
    case 0: case 1: case 2: case 3: case 4: case 5: case 6: case 7: case 8: case 9: case 10: case 11: case 12:
    case 16: case 17: case 18: case 19: case 21:
    case 32: case 33: case 34: case 35: case 36: case 37: case 38: case 39: case 40: case 41: case 42: case 43:
    case 44: case 45: case 48: case 49: case 50: case 51: case 53:
    case 64: case 65: case 66: case 67: case 68: case 69: case 70: case 71: case 72: case 73: case 74: case 75:
    case 76: case 80: case 81: case 82: case 83: case 92:
    case 96: case 97: case 98: case 99: case 100: case 101: case 102: case 103: case 104: case 105: case 106:
    case 107: case 108: case 109: case 112: case 113: case 114: case 115: case 124: {
      bool w64 = op >= 64;
      int base = w64 ? (op >= 96 ? op - 96 : op - 64) : (op >= 32 ? op - 32 : op);
      bool rtn = w64 ? op >= 96 : op >= 32;
      if (!w64 && op == 45) base = 13;   // wrxchg_rtn_b32
      if (w64 && op == 109) base = 13;   // wrxchg_rtn_b64
      if (rtn) nread = w64 ? 2 : 1;
      int nb = w64 ? 8 : 4;
      lanes(m, [&](int l) {
        uint32_t a = addr[l] + off16; lds_check(w, a, nb, true, l);
        uint64_t old = 0; std::memcpy(&old, lds.data() + a, nb);
        b_lds_rd += (uint64_t)nb; b_lds_wr += (uint64_t)nb;  // an LDS atomic reads and writes its dword(s)
        uint64_t v = w64 ? mk64(d0[l], d0[64 + l]) : d0[l];
        uint64_t v2 = d1 ? (w64 ? mk64(d1[l], d1[64 + l]) : d1[l]) : 0;
        uint64_t r = old;
        if (w64) {
          double fo = D(old), fv = D(v);
          switch (base) {
            case 0: r = old + v; break; case 1: r = old - v; break; case 2: r = v - old; break;
            case 3: r = old >= v ? 0 : old + 1; break; case 4: r = (old == 0 || old > v) ? v : old - 1; break;
            case 5: r = (uint64_t)std::min((int64_t)old, (int64_t)v); break; case 6: r = (uint64_t)std::max((int64_t)old, (int64_t)v); break;
            case 7: r = std::min(old, v); break; case 8: r = std::max(old, v); break;
            case 9: r = old & v; break; case 10: r = old | v; break; case 11: r = old ^ v; break;
            case 12: r = (old & ~v) | v2; break; case 13: r = v; break;
            case 16: r = old == v ? v2 : old; break;
            case 17: r = fo == fv ? v2 : old; break;
            case 18: r = fv < fo ? v : old; break; case 19: r = fv > fo ? v : old; break;
            case 28: r = BD(fo + fv); break;
            default: unsupported(w, "unsupported DS opcode " + in.row->name);
          }
        } else {
          uint32_t o = (uint32_t)old, x = (uint32_t)v, y = (uint32_t)v2, q = o;
          switch (base) {
            case 0: q = o + x; break; case 1: q = o - x; break; case 2: q = x - o; break;
            case 3: q = o >= x ? 0 : o + 1; break; case 4: q = (o == 0 || o > x) ? x : o - 1; break;
            case 5: q = (uint32_t)std::min((int32_t)o, (int32_t)x); break; case 6: q = (uint32_t)std::max((int32_t)o, (int32_t)x); break;
            case 7: q = std::min(o, x); break; case 8: q = std::max(o, x); break;
            case 9: q = o & x; break; case 10: q = o | x; break; case 11: q = o ^ x; break;
            case 12: q = (o & ~x) | y; break; case 13: q = x; break;
            case 16: q = o == x ? y : o; break;
            case 17: q = F(o) == F(x) ? y : o; break;
            case 18: q = F(x) < F(o) ? x : o; break; case 19: q = F(x) > F(o) ? x : o; break;
            case 21: q = B(F(o) + F(x)); break;
            default: unsupported(w, "unsupported DS opcode " + in.row->name);
          }
          r = q;
        }
        std::memcpy(lds.data() + a, &r, nb);
        if (rtn) { dst[l] = (uint32_t)old; if (w64) dst[64 + l] = (uint32_t)(old >> 32); }
      });
      break;
    }
    case 224: case 225: case 226: case 227: {
      // gfx950 transposing reads. Each lane supplies an address; lane s's 64 (96 for tr_b6) bits form row
      // s of a per-16-lane-group matrix M[s][e] of E = 64/elem_bits elements. Destination lane l,
      // element n = M[(16/E)*n + (l/E) % (16/E)][l % E] (rows of the same group). For tr_b16 this is the
      // layout AMD's rocjitsu verified on gfx950 (dst lane l halfword n <- lane (l&~15 | (l>>2)&3) + 4n,
      // halfword l&3). tr_b8 by the same rule (lanes 0-7 transpose the even rows, 8-15 the odd ones) is
      // what AITER's mla_a8w8_qh16_qseqlen4 object needs to match its float64 model; the other readings
      // give O(1) errors. tr_b4 / tr_b6 by analogy: UNVERIFIED (docs/emulator.md).
      if (!gfx950) unsupported(w, in.row->name + " is gfx950-only");
      int eb = op == 227 ? 16 : op == 226 ? 8 : op == 224 ? 4 : 6;
      int rowbytes = op == 225 ? 12 : 8;
      int E = (rowbytes * 8) / eb, R = 16 / E;  // elements per row, row stride
      if (R < 1) R = 1;
      nread = rowbytes / 4;
      uint8_t rows[64][12];
      for (int l = 0; l < 64; l++) {
        std::memset(rows[l], 0, 12);
        if (m >> l & 1) ld(addr[l] + off16, rowbytes, l, rows[l]);
      }
      auto get = [&](int s, int e) -> uint32_t {  // element e of row s
        const uint8_t* r = rows[s];
        int bit = e * eb;
        uint32_t v = 0;
        for (int b = 0; b < eb; b++) v |= ((r[(bit + b) >> 3] >> ((bit + b) & 7)) & 1u) << b;
        return v;
      };
      uint32_t res[64][3];
      for (int l = 0; l < 64; l++) {
        uint8_t o[12] = {0};
        int g = l & ~15;
        for (int n = 0; n < E; n++) {
          int s = g + (R * n + (((l & 15) / E) % R)) % 16;
          uint32_t v = get(s, (l & 15) % E);
          int bit = n * eb;
          for (int b = 0; b < eb; b++) if ((v >> b) & 1) o[(bit + b) >> 3] |= (uint8_t)(1u << ((bit + b) & 7));
        }
        std::memcpy(res[l], o, 12);
      }
      lanes(m, [&](int l) { for (int i = 0; i < nread; i++) dst[i * 64 + l] = res[l][i]; });
      break;
    }
    default: unsupported(w, "unsupported DS opcode " + in.row->name);
  }
  if (nread && hz) tag_dst(w, in.dst, nread, TK_DS, seq);
}

// ============================================================================ FLAT / GLOBAL / SCRATCH
template <class T> static T atomic_apply(int op, T old, T v, T cmp, bool& ok) {
  ok = true;
  typedef typename std::make_signed<T>::type S;
  switch (op) {
    case 0: return v;
    case 1: return old == cmp ? v : old;
    case 2: return old + v;
    case 3: return old - v;
    case 4: return (T)std::min((S)old, (S)v);
    case 5: return std::min(old, v);
    case 6: return (T)std::max((S)old, (S)v);
    case 7: return std::max(old, v);
    case 8: return old & v;
    case 9: return old | v;
    case 10: return old ^ v;
    case 11: return old >= v ? 0 : old + 1;
    case 12: return (old == 0 || old > v) ? v : old - 1;
  }
  ok = false;
  return old;
}

static uint32_t atomic_f32(int op, uint32_t old, uint32_t v) {
  if (op == 13) return B(F(old) + F(v));
  if (op == 14) return f2h(h2f(old) + h2f(v)) | (f2h(h2f(old >> 16) + h2f(v >> 16)) << 16);
  // 18: pk_add_bf16
  return num::f32_to_bf16_rne(num::bf16_to_f32(old & 0xffff) + num::bf16_to_f32(v & 0xffff)) |
         ((uint32_t)num::f32_to_bf16_rne(num::bf16_to_f32(old >> 16) + num::bf16_to_f32(v >> 16)) << 16);
}

void Ctx::exec_flat(Wave& w, const Inst& in) {
  const XInst& xi = M.x[w.pc];
  if (!xi.mop_ok) unsupported(w, "unsupported memory opcode " + in.row->name);
  const MemOp& o = xi.mop;
  uint64_t m = w.exec();
  const int enc = in.enc;
  uint64_t seq = ++w.vm_issued;  // counted even without the hazard checker: direct-to-LDS data lands by it
  const uint32_t* a0 = in.src[0] != OPC_NONE ? w.row(in.src[0]) : nullptr;
  const uint32_t* a1 = (a0 && in.nbits[0] == 64) ? w.row((uint16_t)(in.src[0] + 1)) : nullptr;
  const uint32_t* data = in.src[1] != OPC_NONE ? w.row(in.src[1]) : nullptr;
  uint32_t* dst = in.dst != OPC_NONE ? w.row(in.dst) : nullptr;
  uint64_t sbase = 0;
  if (in.saddr != 0x7f) {
    if (enc == ENC_SCRATCH) sbase = in.saddr < 128 ? w.s[in.saddr] : 0;
    else sbase = in.saddr < 127 ? mk64(w.s[in.saddr], w.s[in.saddr + 1]) : 0;
  }
  int32_t ioff = (int32_t)in.offset;
  if (o.lds) {
    // global_load_lds_*: LDS address = M0 + inst_offset + lane * size (as for MUBUF ... lds)
    uint32_t m0 = w.s[124] & (gfx950 ? 0x3ffffu : 0xffffu);
    lanes(m, [&](int l) {
      uint64_t ga = (in.saddr != 0x7f ? sbase + a0[l] : mk64(a0[l], a1[l])) + ioff;
      uint8_t buf[16];
      std::memcpy(buf, gptr(w, ga, o.bytes, false, l), o.bytes);
      uint32_t la = m0 + ioff + (uint32_t)l * (o.bytes < 4 ? 4 : o.bytes);
      uint32_t wv[4] = {0, 0, 0, 0};
      if (o.bytes >= 4) std::memcpy(wv, buf, o.bytes);
      else if (o.bytes == 2) wv[0] = o.sext ? (uint32_t)(int32_t)(int16_t)(buf[0] | buf[1] << 8) : (uint32_t)(buf[0] | buf[1] << 8);
      else wv[0] = o.sext ? (uint32_t)(int32_t)(int8_t)buf[0] : buf[0];
      int nb = o.bytes < 4 ? 4 : o.bytes;
      lds_check(w, la, nb, true, l); lds_track(w, la, nb, true, TK_VM, seq);
      defer_dma(w, seq, la, wv, (uint32_t)nb);
    });
    return;
  }
  // Fast path for GLOBAL dword loads/stores: when every active lane's access lies in one registered
  // buffer, check that once (the per-lane path below reports the exact faulting lane otherwise).
  if (enc == ENC_GLOBAL && o.atomic < 0 && !o.d16 && o.bytes >= 4 && m) {
    uint64_t lo = ~0ull, hi = 0;
    uint64_t* ga_l = w.gaddr;
    lanes(m, [&](int l) {
      uint64_t ga = (in.saddr != 0x7f ? sbase + a0[l] : mk64(a0[l], a1[l])) + ioff;
      ga_l[l] = ga; lo = std::min(lo, ga); hi = std::max(hi, ga);
    });
    const Region* r = last_region;
    bool ok = r && lo >= r->base && hi + o.bytes <= r->base + r->size && (r->writable || !o.store);
    if (!ok) { r = find_region(lo, hi + o.bytes - lo); ok = r && (r->writable || !o.store); if (ok) last_region = r; }
    if (ok) {
      lanes(m, [&](int l) { touch(ga_l[l], o.bytes, o.store); });
      if (o.store) lanes(m, [&](int l) { uint8_t* p = reinterpret_cast<uint8_t*>(ga_l[l]);
        for (int i = 0; i < o.nregs; i++) std::memcpy(p + 4 * i, &data[i * 64 + l], 4); });
      else lanes(m, [&](int l) { const uint8_t* p = reinterpret_cast<const uint8_t*>(ga_l[l]);
        for (int i = 0; i < o.nregs; i++) std::memcpy(&dst[i * 64 + l], p + 4 * i, 4); });
      if (hz && dst && !o.store) tag_dst(w, in.dst, o.nregs, TK_VM, seq);
      return;
    }
  }
  lanes(m, [&](int l) {
    uint8_t* p;
    uint64_t ga;
    if (enc == ENC_SCRATCH) {
      uint64_t pa = sbase + (a0 ? a0[l] : 0) + ioff;
      if (pa + o.bytes > priv_size) violation(w, pa, o.bytes, o.store, l, "scratch");
      p = w.priv.data() + (size_t)l * priv_size + pa;
    } else {
      ga = (enc == ENC_GLOBAL && in.saddr != 0x7f) ? sbase + a0[l] + ioff : mk64(a0[l], a1[l]) + ioff;
      if (enc == ENC_FLAT && (ga >> 32) == (kSharedAperture >> 32)) {
        uint32_t la = (uint32_t)ga;
        lds_check(w, la, o.bytes, o.store, l); lds_track(w, la, o.bytes, o.store, TK_VM, seq);
        p = lds.data() + la;
      } else if (enc == ENC_FLAT && (ga >> 32) == (kPrivateAperture >> 32)) {
        uint64_t pa = (uint32_t)ga;
        if (pa + o.bytes > priv_size) violation(w, pa, o.bytes, o.store, l, "scratch");
        p = w.priv.data() + (size_t)l * priv_size + pa;
      } else p = gptr(w, ga, o.bytes, o.store || o.atomic >= 0, l);
    }
    if (o.atomic >= 0) {
      bool ok = true;
      if (o.atomic64) {
        uint64_t old; std::memcpy(&old, p, 8);
        uint64_t v = mk64(data[l], data[64 + l]), c = o.atomic == 1 ? mk64(data[128 + l], data[192 + l]) : 0, r;
        if (o.atomic == 15) r = BD(D(old) + D(v));
        else if (o.atomic == 16) r = BD(dmin(D(old), D(v)));
        else if (o.atomic == 17) r = BD(dmax(D(old), D(v)));
        else r = atomic_apply<uint64_t>(o.atomic, old, v, c, ok);
        if (o.atomic == 1) { r = old == c ? v : old; }
        std::memcpy(p, &r, 8);
        if (in.glc && dst) { dst[l] = (uint32_t)old; dst[64 + l] = (uint32_t)(old >> 32); }
      } else {
        uint32_t old; std::memcpy(&old, p, 4);
        uint32_t v = data[l], c = o.atomic == 1 ? data[64 + l] : 0, r;
        if (o.atomic == 13 || o.atomic == 14 || o.atomic == 18) r = atomic_f32(o.atomic, old, v);
        else r = atomic_apply<uint32_t>(o.atomic, old, v, c, ok);
        std::memcpy(p, &r, 4);
        if (in.glc && dst) dst[l] = old;
      }
      if (!ok) unsupported(w, "unsupported atomic " + in.row->name);
      return;
    }
    if (o.store) {
      if (o.d16hi) { uint32_t v = data[l] >> 16; std::memcpy(p, &v, o.bytes); }
      else if (o.nregs == 1) std::memcpy(p, &data[l], o.bytes);
      else for (int i = 0; i < o.nregs; i++) std::memcpy(p + 4 * i, &data[i * 64 + l], 4);
      return;
    }
    // loads
    if (o.nregs > 1) { for (int i = 0; i < o.nregs; i++) std::memcpy(&dst[i * 64 + l], p + 4 * i, 4); return; }
    uint32_t v = 0;
    if (o.bytes == 4) std::memcpy(&v, p, 4);
    else if (o.bytes == 2) { uint16_t h; std::memcpy(&h, p, 2); v = o.sext ? (uint32_t)(int32_t)(int16_t)h : h; }
    else { uint8_t b = *p; v = o.sext ? (uint32_t)(int32_t)(int8_t)b : b; }
    if (o.d16) {
      v &= 0xffff;
      dst[l] = o.d16hi ? ((dst[l] & 0xffffu) | (v << 16)) : ((dst[l] & 0xffff0000u) | v);
    } else dst[l] = v;
  });
  if (hz && dst && (!o.store) && (o.atomic < 0 || in.glc)) tag_dst(w, in.dst, o.nregs, TK_VM, seq);
}

// ============================================================================ MUBUF (buffer resource)
void Ctx::exec_mubuf(Wave& w, const Inst& in) {
  if (in.enc == ENC_MUBUF && (in.op == 40 || in.op == 41)) {  // buffer_wbl2 / buffer_inv: cache
    ++w.vm_issued;  // write-back / invalidate; memory is coherent here. They count in vmcnt.
    return;
  }
  const XInst& xi = M.x[w.pc];
  if (!xi.mop_ok) unsupported(w, "unsupported buffer opcode " + in.row->name);
  const MemOp& o = xi.mop;
  uint64_t m = w.exec();
  uint64_t seq = ++w.vm_issued;  // counted even without the hazard checker: direct-to-LDS data lands by it
  const uint32_t* r = &w.s[in.srsrc];
  uint64_t base = r[0] | ((uint64_t)(r[1] & 0xffff) << 32);
  uint32_t stride = (r[1] >> 16) & 0x3fff;
  bool swz = (r[1] >> 31) & 1;
  uint32_t num = r[2];
  bool add_tid = (r[3] >> 23) & 1;
  if (swz) unsupported(w, "swizzled buffer resources are not modelled");
  uint32_t soff = in.soffset < 128 ? w.s[in.soffset] : (in.is_const[3] ? (uint32_t)in.cval[3] : 0);
  const uint32_t* va = w.row(in.src[0]);
  const uint32_t* va1 = w.row((uint16_t)(in.src[0] + 1));
  const uint32_t* data = w.row(in.src[1]);
  uint32_t* dst = w.row(in.src[1]);
  bool lds_mode = in.lds;
  uint32_t m0 = w.s[124] & (gfx950 ? 0x3ffffu : 0xffffu);
  int comp = o.bytes >= 4 ? 4 : o.bytes;  // range check per dword component
  int ncomp = o.bytes >= 4 ? o.bytes / 4 : 1;
  // Addressing and range checking (GFX9/CDNA, as AMD's rocjitsu models it after gfx950 hardware):
  //   offset = (voffset + inst_offset) mod 2^32 + soffset; address = base + offset + stride * index
  //   raw / offen-only accesses are checked by byte offset: every dword (or the whole sub-dword access)
  //   must end within num_records; idxen accesses on a strided buffer are checked by index < num_records;
  //   add_tid_enable adds lane * stride to the address and is not range checked.
  lanes(m, [&](int l) {
    uint32_t idx = 0, voff = 0;
    if (in.idxen && in.offen) { idx = va[l]; voff = va1[l]; }
    else if (in.idxen) idx = va[l];
    else if (in.offen) voff = va[l];
    uint64_t off = (uint64_t)(uint32_t)(voff + in.offset) + soff;
    uint64_t a0 = base + off + (uint64_t)stride * idx + (add_tid ? (uint64_t)stride * l : 0);
    bool idx_check = stride != 0 && in.idxen;
    bool whole = o.atomic >= 0;  // atomics: all or nothing
    auto oob = [&](int j) -> bool {
      if (add_tid) return false;
      if (idx_check) return idx >= num;
      if (whole) return off + (uint64_t)o.bytes > num;
      return off + (uint64_t)j * 4 + comp > num;
    };
    if (lds_mode) {
      uint32_t la = m0 + in.offset + (uint32_t)l * 4 * ncomp;
      for (int j = 0; j < ncomp; j++) {
        uint32_t v = 0;
        if (!oob(j)) {
          const uint8_t* p = gptr(w, a0 + 4 * j, comp, false, l);
          if (comp == 4) std::memcpy(&v, p, 4);
          else if (comp == 2) { uint16_t h; std::memcpy(&h, p, 2); v = o.sext ? (uint32_t)(int32_t)(int16_t)h : h; }
          else v = o.sext ? (uint32_t)(int32_t)(int8_t)*p : *p;
        }
        lds_check(w, la + 4 * j, 4, true, l); lds_track(w, la + 4 * j, 4, true, TK_VM, seq);
        defer_dma(w, seq, la + 4 * j, &v, 4);
      }
      return;
    }
    if (o.atomic >= 0) {
      if (oob(0)) { if (in.glc) { dst[l] = 0; if (o.atomic64) dst[64 + l] = 0; } return; }
      uint8_t* p = gptr(w, a0, o.bytes, true, l);
      bool ok = true;
      if (o.atomic64) {
        uint64_t old; std::memcpy(&old, p, 8);
        uint64_t v = mk64(data[l], data[64 + l]), c = o.atomic == 1 ? mk64(data[128 + l], data[192 + l]) : 0, rr;
        if (o.atomic == 15) rr = BD(D(old) + D(v)); else if (o.atomic == 16) rr = BD(dmin(D(old), D(v))); else if (o.atomic == 17) rr = BD(dmax(D(old), D(v)));
        else rr = atomic_apply<uint64_t>(o.atomic, old, v, c, ok);
        std::memcpy(p, &rr, 8);
        if (in.glc) { dst[l] = (uint32_t)old; dst[64 + l] = (uint32_t)(old >> 32); }
      } else {
        uint32_t old; std::memcpy(&old, p, 4);
        uint32_t v = data[l], c = o.atomic == 1 ? data[64 + l] : 0, rr;
        if (o.atomic == 13 || o.atomic == 14 || o.atomic == 18) rr = atomic_f32(o.atomic, old, v);
        else rr = atomic_apply<uint32_t>(o.atomic, old, v, c, ok);
        std::memcpy(p, &rr, 4);
        if (in.glc) dst[l] = old;
      }
      if (!ok) unsupported(w, "unsupported atomic " + in.row->name);
      return;
    }
    if (o.store) {
      for (int j = 0; j < ncomp; j++) {
        if (oob(j)) continue;  // dropped
        uint8_t* p = gptr(w, a0 + 4 * j, comp, true, l);
        uint32_t v = o.d16hi ? data[l] >> 16 : data[j * 64 + l];
        std::memcpy(p, &v, comp);
      }
      return;
    }
    for (int j = 0; j < ncomp; j++) {
      uint32_t v = 0;
      if (!oob(j)) {
        const uint8_t* p = gptr(w, a0 + 4 * j, comp, false, l);
        if (comp == 4) std::memcpy(&v, p, 4);
        else if (comp == 2) { uint16_t h; std::memcpy(&h, p, 2); v = o.sext ? (uint32_t)(int32_t)(int16_t)h : h; }
        else v = o.sext ? (uint32_t)(int32_t)(int8_t)*p : *p;
      }
      if (o.d16) { v &= 0xffff; dst[l] = o.d16hi ? ((dst[l] & 0xffffu) | (v << 16)) : ((dst[l] & 0xffff0000u) | v); }
      else dst[j * 64 + l] = v;
    }
  });
  if (hz && !o.store && !lds_mode && (o.atomic < 0 || in.glc)) tag_dst(w, in.src[1], o.nregs, TK_VM, seq);
}

// ============================================================================ launch
static void put_le(std::vector<uint8_t>& b, uint32_t off, uint64_t v, uint32_t size) {
  if (off + size > b.size()) b.resize(off + size, 0);
  for (uint32_t i = 0; i < size && i < 8; i++) b[off + i] = (uint8_t)(v >> (8 * i));
}

// One workgroup, linear index `linear` in grid order x, y, z.
void Ctx::run_workgroup(uint64_t linear, uint64_t nthreads) {
  const uint32_t xg = (uint32_t)(linear % P.grid[0]), y = (uint32_t)(linear / P.grid[0] % P.grid[1]),
                 z = (uint32_t)(linear / ((uint64_t)P.grid[0] * P.grid[1]));
  cur_wg = linear;
  const KernelDesc* kdp = &kd;
  wg[0] = xg; wg[1] = y; wg[2] = z;
  tracing = P.trace && P.trace->begin_workgroup(wg, nwaves);        // timing hook
  if (P.trace && !tracing && !P.trace->run_untraced()) return;      // timing hook
  std::fill(lds.begin(), lds.end(), 0);
  if (hz) std::fill(lmeta.begin(), lmeta.end(), LdsMeta());
  if (lc) std::fill(lds_orig.begin(), lds_orig.end(), -1);
  for (auto& w : waves) { w.dma.clear(); w.resume = false; }
  epoch = 1;
  for (int i = 0; i < nwaves; i++) {
    // registers start at 0 (hardware: undefined): the VGPRs and AGPRs the descriptor / metadata
    // allocate (the unified granule count bounds both)
    size_t used = std::min<size_t>((size_t)std::max(kdp->vgpr_count, 8), 256);
    size_t acc = kdp->md_agpr >= 0 ? std::min<size_t>((size_t)kdp->md_agpr, 256) : 256;
    std::fill(waves[i].v, waves[i].v + used * 64, 0);
    std::fill(waves[i].v + 256 * 64, waves[i].v + (256 + acc) * 64, 0);
    init_wave(waves[i], i, (uint32_t)nthreads);
  }
  // The waves of a workgroup take turns of kQuantum instructions (round robin, wave order): close to
  // the hardware, where they issue side by side, so code that relies on issue order across waves
  // within a barrier interval (AITER's: every wave reads an LDS buffer right after a barrier, before
  // any wave refills it) sees what it would on the GPU. Deterministic: the order is fixed.
  for (;;) {
    bool ran = false;
    for (auto& w : waves) if (w.state == WS_RUN) { run_wave(w, kQuantum); ran = true; }
    if (ran) continue;
    // nobody can run: waves that yielded at a wait for direct-to-LDS data resume (and retire it)
    bool resumed = false;
    for (auto& w : waves) if (w.state == WS_YIELD) { w.state = WS_RUN; w.resume = true; resumed = true; }
    if (resumed) continue;
    int done = 0;
    for (auto& w : waves) done += w.state == WS_DONE;
    if (done == nwaves) break;
    for (auto& w : waves) if (w.state == WS_BARRIER) { w.state = WS_RUN; w.since_barrier = 0; }
    epoch++;
  }
  if (tracing) P.trace->end_workgroup();  // timing hook
}

void Ctx::merge_from(const Ctx& o) {
  for (size_t i = 0; i < icount.size(); i++) icount[i] += o.icount[i];
  b_vm_ld += o.b_vm_ld; b_vm_st += o.b_vm_st; b_sm += o.b_sm; b_lds_rd += o.b_lds_rd; b_lds_wr += o.b_lds_wr;
  lines.insert(o.lines.begin(), o.lines.end());
  auto merge_sites = [](std::map<std::pair<int, int>, HazardSite>& to, const std::map<std::pair<int, int>, HazardSite>& from) {
    for (auto& kv : from) {
      auto it = to.find(kv.first);
      if (it == to.end()) { to.insert(kv); continue; }
      if (kv.second.wg < it->second.wg) { it->second.message = kv.second.message; it->second.wg = kv.second.wg; }
      it->second.count += kv.second.count;
    }
  };
  merge_sites(hazard_sites, o.hazard_sites);
  merge_sites(lane_sites, o.lane_sites);
  mfma_partial += o.mfma_partial;
}

static unsigned default_threads() {
  const char* e = std::getenv("MOONMATH_EMU_THREADS");
  if (e && *e) { unsigned long v = std::strtoul(e, nullptr, 10); return v ? (unsigned)v : 1u; }
  unsigned h = std::thread::hardware_concurrency();
  return h ? h : 1u;
}

Counters Module::launch(const std::string& name, const LaunchParams& P) {
  const KernelDesc* kd = co_.find(name);
  if (!kd) {
    std::string all;
    for (auto& k : co_.kernels) all += (all.empty() ? "" : ", ") + k.name;
    throw EmuError("no kernel named '" + name + "' in the code object (kernels: " + all + ")");
  }
  for (int i = 0; i < 3; i++) {
    if (P.grid[i] == 0 || P.block[i] == 0) throw EmuError("grid and block dimensions must be >= 1");
  }
  uint64_t nthreads = (uint64_t)P.block[0] * P.block[1] * P.block[2];
  if (nthreads > 1024) throw EmuError("block has " + std::to_string(nthreads) + " work-items; the maximum is 1024");
  if (kd->kp_wavefront_size32) throw EmuError("wave32 kernels are not supported (CDNA is wave64)");
  if (impl_->idx_of(kd->entry_vaddr) < 0) throw EmuError("kernel entry is not in an executable section");

  Ctx C(*impl_, co_, *kd, P);
  // ---- kernarg segment
  uint32_t ksz = std::max<uint32_t>(kd->kernarg_size, kd->md_kernarg_size);
  for (auto& a : kd->args) ksz = std::max(ksz, a.offset + a.size);
  C.kernarg.assign(std::max<uint32_t>(ksz, 16) + 256, 0);  // + slack for s_load_dwordx8 overreads
  size_t explicit_i = 0;
  int arg_index = 0;
  std::vector<std::pair<const KernelArg*, int>> explicit_args;
  for (auto& a : kd->args) if (a.value_kind.rfind("hidden_", 0) != 0) explicit_args.emplace_back(&a, arg_index++);
  if (P.args.size() != explicit_args.size()) {
    throw EmuError("kernel '" + name + "' takes " + std::to_string(explicit_args.size()) + " arguments, got " + std::to_string(P.args.size()));
  }
  for (auto& ea : explicit_args) {
    const KernelArg& a = *ea.first;
    const LaunchArg& la = P.args[explicit_i++];
    uint64_t v = la.u;
    if (la.kind == LaunchArg::BYTES) {  // a by-value struct: its bytes as the caller laid them out
      if (la.bytes.size() != a.size)
        throw EmuError("kernel '" + name + "' argument " + std::to_string(ea.second) + " is " + std::to_string(a.size) +
                       " bytes; got a struct of " + std::to_string(la.bytes.size()));
      std::memcpy(C.kernarg.data() + a.offset, la.bytes.data(), la.bytes.size());
      for (auto& rg : la.regions) {
        if (!rg.second) continue;
        Region r; r.base = rg.first; r.size = rg.second;
        r.name = "arg " + std::to_string(ea.second) + (a.name.empty() ? "" : " (" + a.name + ")") + " buffer";
        C.regions.push_back(r);
      }
      continue;
    }
    if (la.kind == LaunchArg::FLOAT) {
      if (a.size == 4) { float f = (float)la.f; uint32_t u; std::memcpy(&u, &f, 4); v = u; }
      else if (a.size == 8) { std::memcpy(&v, &la.f, 8); }
      else if (a.size == 2) { v = num::f32_to_f16_rne((float)la.f); }
      else throw EmuError("float argument for a " + std::to_string(a.size) + "-byte parameter");
    }
    put_le(C.kernarg, a.offset, v, std::min<uint32_t>(a.size, 8));
    if (la.has_region && la.rsize) {
      Region r; r.base = la.rbase; r.size = la.rsize;
      r.name = "arg " + std::to_string(ea.second) + (a.name.empty() ? "" : " (" + a.name + ")");
      C.regions.push_back(r);
    }
  }
  // ---- hidden arguments (code object v5)
  uint32_t bc[3], rem[3];
  for (int i = 0; i < 3; i++) { bc[i] = P.grid[i]; rem[i] = 0; }
  uint32_t dims = P.grid[2] > 1 || P.block[2] > 1 ? 3 : (P.grid[1] > 1 || P.block[1] > 1 ? 2 : 1);
  for (auto& a : kd->args) {
    const std::string& k = a.value_kind;
    uint64_t v = 0;
    if (k == "hidden_block_count_x") v = bc[0];
    else if (k == "hidden_block_count_y") v = bc[1];
    else if (k == "hidden_block_count_z") v = bc[2];
    else if (k == "hidden_group_size_x") v = P.block[0];
    else if (k == "hidden_group_size_y") v = P.block[1];
    else if (k == "hidden_group_size_z") v = P.block[2];
    else if (k == "hidden_remainder_x") v = rem[0];
    else if (k == "hidden_remainder_y") v = rem[1];
    else if (k == "hidden_remainder_z") v = rem[2];
    else if (k == "hidden_grid_dims") v = dims;
    else if (k == "hidden_dynamic_lds_size") v = P.dynamic_lds;
    else if (k.rfind("hidden_", 0) == 0) v = 0;  // global offsets, printf/hostcall buffers, queue ptr...: 0
    else continue;
    put_le(C.kernarg, a.offset, v, std::min<uint32_t>(a.size, 8));
  }
  // ---- dispatch packet (hsa_kernel_dispatch_packet_t) and a zeroed queue
  C.packet.assign(64, 0);
  {
    uint16_t setup = (uint16_t)dims;
    put_le(C.packet, 2, setup, 2);
    put_le(C.packet, 4, P.block[0], 2); put_le(C.packet, 6, P.block[1], 2); put_le(C.packet, 8, P.block[2], 2);
    put_le(C.packet, 12, (uint64_t)P.grid[0] * P.block[0], 4); put_le(C.packet, 16, (uint64_t)P.grid[1] * P.block[1], 4);
    put_le(C.packet, 20, (uint64_t)P.grid[2] * P.block[2], 4);
    put_le(C.packet, 24, kd->private_segment_fixed_size, 4);
    put_le(C.packet, 28, kd->group_segment_fixed_size + P.dynamic_lds, 4);
    put_le(C.packet, 40, reinterpret_cast<uint64_t>(C.kernarg.data()), 8);
  }
  C.queue.assign(256, 0);
  {
    Region r; r.base = reinterpret_cast<uint64_t>(C.kernarg.data()); r.size = C.kernarg.size(); r.name = "kernarg segment"; r.writable = false; C.regions.push_back(r);
    r.base = reinterpret_cast<uint64_t>(C.packet.data()); r.size = C.packet.size(); r.name = "dispatch packet"; C.regions.push_back(r);
    r.base = reinterpret_cast<uint64_t>(C.queue.data()); r.size = C.queue.size(); r.name = "queue"; C.regions.push_back(r);
    r.base = reinterpret_cast<uint64_t>(co_.loaded.data()); r.size = co_.loaded.size(); r.name = "code object"; C.regions.push_back(r);
  }
  std::sort(C.regions.begin(), C.regions.end(), [](const Region& a, const Region& b) { return a.base < b.base; });
  // ---- workgroup resources
  C.nwaves = (int)((nthreads + 63) / 64);
  C.lds_size = kd->group_segment_fixed_size + P.dynamic_lds;
  uint32_t lds_max = co_.gfx950 ? 160 * 1024 : 64 * 1024;
  if (C.lds_size > lds_max) throw EmuError("LDS request of " + std::to_string(C.lds_size) + " bytes exceeds the " + std::to_string(lds_max) + " bytes of " + co_.arch);
  C.lds.assign(C.lds_size + 16, 0);
  C.lmeta.assign(C.lds_size / 4 + 8, LdsMeta());
  C.lds_wpc.assign(C.lds_size / 4 + 8, 0);
  if (C.lc) C.lds_orig.assign(C.lds_size / 4 + 8, -1);
  C.priv_size = kd->private_segment_fixed_size;
  C.waves.resize(C.nwaves);
  C.vfile.assign((size_t)C.nwaves * 576 * 64, 0);  // 256 VGPR + 256 AGPR rows + slack for ranges past a255
  for (int i = 0; i < C.nwaves; i++) {
    C.waves[i].v = C.vfile.data() + (size_t)i * 576 * 64;
    if (C.priv_size) C.waves[i].priv.assign((size_t)C.priv_size * 64, 0);
  }
  C.icount.assign(impl_->insts.size(), 0);
  // ---- float environment: f32 denormal mode from the descriptor (MXCSR FTZ/DAZ when flushing)
  unsigned int old_csr = _mm_getcsr();  // run_wave sets rounding/denormal control per wave (MODE)
  struct Restore { unsigned int c; ~Restore() { _mm_setcsr(c); } } restore{old_csr};

  C.kernarg_p = C.kernarg.data(); C.kernarg_n = C.kernarg.size();
  C.packet_p = C.packet.data(); C.queue_p = C.queue.data();
  const uint64_t nwg = (uint64_t)P.grid[0] * P.grid[1] * P.grid[2];
  // Workgroups run on several threads when that cannot change a result: the kernel has no global
  // atomics (their order across workgroups could change float sums) and no s_memtime. Each thread
  // has its own copy of the workgroup state; counters are added up and each hazard site keeps the report
  // of the lowest-numbered workgroup, so results and counters equal the one-thread run's bit for bit.
  // After an error, the error of the lowest-numbered failing workgroup is raised (the one a single
  // thread would have met first); memory written by higher-numbered workgroups is then unspecified.
  unsigned nthr = P.threads ? P.threads : default_threads();
  if (impl_->serial_only || nwg < 2 || P.trace) nthr = 1;  // timing hook: the trace sink is single-threaded
  nthr = (unsigned)std::min<uint64_t>(nthr, nwg);
  if (nthr <= 1) {
    for (uint64_t i = 0; i < nwg; i++) C.run_workgroup(i, nthreads);
  } else {
    std::vector<std::unique_ptr<Ctx>> workers;
    for (unsigned t = 0; t < nthr; t++) {
      workers.emplace_back(new Ctx(C));
      Ctx& W = *workers.back();
      for (int i = 0; i < W.nwaves; i++) W.waves[i].v = W.vfile.data() + (size_t)i * 576 * 64;  // own registers
      W.last_region = nullptr;
    }
    std::atomic<uint64_t> next{0}, first_bad{~0ull};
    std::mutex err_mu;
    std::exception_ptr err;
    auto work = [&](Ctx& W) {
      for (uint64_t i; (i = next.fetch_add(1)) < nwg;) {
        if (i > first_bad.load()) break;
        try {
          W.run_workgroup(i, nthreads);
        } catch (...) {
          std::lock_guard<std::mutex> g(err_mu);
          if (i < first_bad.load()) { first_bad = i; err = std::current_exception(); }
          break;
        }
      }
    };
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < nthr; t++) pool.emplace_back(work, std::ref(*workers[t]));
    work(*workers[0]);
    for (auto& th : pool) th.join();
    if (err) std::rethrow_exception(err);
    for (auto& W : workers) C.merge_from(*W);
  }
  // ---- counters
  Counters cnt;
  cnt.vmem_load_bytes = C.b_vm_ld; cnt.vmem_store_bytes = C.b_vm_st; cnt.smem_bytes = C.b_sm;
  cnt.lds_read_bytes = C.b_lds_rd; cnt.lds_write_bytes = C.b_lds_wr; cnt.global_lines = C.lines.size();
  for (auto& kv : C.hazard_sites) cnt.hazards.push_back(kv.second.message + " [" + std::to_string(kv.second.count) + " times]");
  for (auto& kv : C.lane_sites) cnt.lanes.push_back(kv.second.message + " [" + std::to_string(kv.second.count) + " times]");
  cnt.mfma_partial_exec = C.mfma_partial;
  cnt.workgroups = nwg;
  cnt.waves = nwg * C.nwaves;
  for (size_t i = 0; i < impl_->insts.size(); i++) {
    uint64_t c = C.icount[i];
    if (!c) continue;
    const Inst& in = impl_->insts[i];
    const XInst& x = impl_->x[i];
    cnt.wave_instructions += c;
    cnt.pc_counts[in.pc] = c;
    switch (in.enc) {
      case ENC_SOPP:
        if (in.op == 12) cnt.waitcnt += c;
        else if (in.op == 10) cnt.barrier += c;
        else if (in.op == 2 || (in.op >= 4 && in.op <= 9)) cnt.branch += c;
        break;
      case ENC_SOP1:
        if (in.op == 29 || in.op == 30) cnt.branch += c; else cnt.salu += c;
        break;
      case ENC_SOP2: case ENC_SOPC: case ENC_SOPK: cnt.salu += c; break;
      case ENC_SMEM: cnt.smem += c; break;
      case ENC_DS: cnt.ds += c; break;
      case ENC_FLAT: case ENC_GLOBAL: case ENC_SCRATCH: case ENC_MUBUF: case ENC_MTBUF: cnt.vmem += c; break;
      case ENC_VOP3P: case ENC_VOP3PX2:
        if (x.is_mfma) { cnt.mfma += c; cnt.mfma_by_opcode[in.row->name] += c; }
        else cnt.valu += c;
        break;
      default:
        cnt.valu += c;
        if (x.is_trans) cnt.trans += c;
    }
  }
  return cnt;
}

// ============================================================================ supported opcodes
// An opcode is "supported" when the executor has an implementation for it. We find out by probing:
// every (encoding, opcode) of the ISA table is executed once on a scratch wave with EXEC = 0 and no
// memory; an UnsupportedInstruction means "not implemented". (Other errors, e.g. a sanitizer stop on the
// null address of a scalar load, mean the opcode is implemented.)
static std::vector<std::string> probe_supported(bool gfx950) {
  std::vector<std::string> out;
  CodeObject co; co.gfx950 = gfx950; co.arch = gfx950 ? "gfx950" : "gfx942"; co.loaded.assign(64, 0);
  KernelDesc kd; kd.name = "<probe>";
  LaunchParams P; P.check_hazards = false;
  Module::Impl impl; impl.gfx950 = gfx950; impl.va2idx.assign(32, -1);
  for (auto& r : isa_rows()) {
    if (r.enc == ENC_MTBUF) continue;
    Inst in;
    in.row = &r; in.enc = (uint8_t)r.enc; in.src_enc = (uint8_t)r.enc; in.op = (uint16_t)r.op;
    in.key = r.enc * 1024 + r.op;
    if (r.enc == ENC_VOP1) in.key = ENC_VOP3 * 1024 + 320 + r.op;
    if (r.enc == ENC_VOP2) in.key = ENC_VOP3 * 1024 + 256 + r.op;
    if (r.enc == ENC_VOPC) in.key = ENC_VOP3 * 1024 + r.op;
    if (r.enc == ENC_VOP3PX2) { in.key = ENC_VOP3P * 1024 + 128 + r.op; in.scale_src[0] = OPC_VGPR + 40; in.scale_src[1] = OPC_VGPR + 41; }
    in.src[0] = OPC_VGPR + 0; in.src[1] = OPC_VGPR + 8; in.src[2] = OPC_VGPR + 16;
    in.dst = OPC_VGPR + 24; in.sdst = 10; in.sbase = 0; in.srsrc = 0; in.soffset = 0; in.target = 0;
    if (r.enc <= ENC_SOPC) { in.src[0] = 4; in.src[1] = 6; in.sdst = 10; in.dst = OPC_NONE; }
    if (r.enc == ENC_VOP3 && (r.op == 322 || r.op == 649)) in.dst = 12;
    if (r.enc == ENC_VOP3 && (r.op == 649 || r.op == 650)) { in.src[1] = 4; if (r.op == 650) in.src[0] = 6; }
    XInst x; analyse(in, x, gfx950);
    impl.insts.assign(1, in); impl.x.assign(1, x);
    Ctx C(impl, co, kd, P);
    C.waves.resize(1);
    std::vector<uint32_t> vf(576 * 64, 0);
    Wave& w = C.waves[0];
    w.v = vf.data(); std::memset(w.s, 0, sizeof w.s); w.pc = 0; w.state = WS_RUN; w.id = 0;
    C.lds.assign(64, 0); C.lmeta.assign(16, LdsMeta()); C.lds_size = 0; C.icount.assign(1, 0); C.nwaves = 1;
    bool ok = true;
    try { C.step(w); } catch (const UnsupportedInstruction&) { ok = false; } catch (const std::exception&) { ok = true; }
    if (!ok) continue;
    out.push_back(r.name);
    if (r.vop3sd && r.op >= 281 && r.op <= 286) out.push_back(r.name + "_e64");
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<std::string> supported_opcodes(bool gfx950) {
  static std::vector<std::string> cache[2];
  static std::once_flag once[2];
  std::call_once(once[gfx950 ? 1 : 0], [&] { cache[gfx950 ? 1 : 0] = probe_supported(gfx950); });
  return cache[gfx950 ? 1 : 0];
}

}  // namespace mmemu
