// moonmath-emu: trace recording and the cycle simulator of the timing model (see timing.hpp and
// docs/performance.md for the model and the source of every constant).
#include "timing.hpp"

#include "exec.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include "mfma.hpp"

namespace mmemu {

// ============================================================================ trace recording
Tracer::Tracer(const TimingConfig& cfg, bool gfx950, std::vector<std::array<uint32_t, 3>> wanted, bool run_untraced)
    : cfg_(cfg), gfx950_(gfx950), run_untraced_(run_untraced), wanted_(std::move(wanted)) {}

bool Tracer::begin_workgroup(const uint32_t wg[3], int nwaves) {
  bool want = false;
  for (auto& w : wanted_) if (w[0] == wg[0] && w[1] == wg[1] && w[2] == wg[2]) { want = true; break; }
  if (!want) return false;
  wgs.emplace_back();
  cur_ = &wgs.back();
  std::memcpy(cur_->id, wg, sizeof cur_->id);
  cur_->waves.resize(nwaves);
  return true;
}

void Tracer::end_workgroup() { cur_ = nullptr; }

void Tracer::set_buffers(std::vector<std::pair<uint64_t, uint64_t>> buffers) {
  // one canonical base per distinct storage (two arguments viewing one storage share it), in argument order
  std::vector<std::pair<uint64_t, uint64_t>> uniq;
  for (auto& b : buffers) {
    bool seen = false;
    for (auto& u : uniq) seen = seen || u.first == b.first;
    if (!seen && b.second > 0) uniq.push_back(b);
  }
  std::vector<size_t> order(uniq.size());
  for (size_t i = 0; i < order.size(); i++) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return uniq[x].first < uniq[y].first; });
  buffers_.clear(); canon_.clear();
  for (size_t i : order) { buffers_.push_back(uniq[i]); canon_.push_back(canonical_address(i)); }
  last_buffer_ = 0;
}

uint64_t Tracer::traced_address(uint64_t a) {
  if (buffers_.empty()) return a;
  auto inside = [&](size_t i) { return a >= buffers_[i].first && a - buffers_[i].first < buffers_[i].second; };
  if (!inside(last_buffer_)) {
    auto it = std::upper_bound(buffers_.begin(), buffers_.end(), a,
                               [](uint64_t x, const std::pair<uint64_t, uint64_t>& b) { return x < b.first; });
    if (it == buffers_.begin()) { unmapped_accesses++; return a; }
    size_t i = (size_t)(it - buffers_.begin()) - 1;
    if (!inside(i)) { unmapped_accesses++; return a; }
    last_buffer_ = i;
  }
  return canon_[last_buffer_] + (a - buffers_[last_buffer_].first);
}

static bool has(const std::string& s, const char* p) { return s.find(p) != std::string::npos; }

// bytes per lane of a VMEM / DS access, from the mnemonic
static int access_bytes(const std::string& n) {
  if (has(n, "x4") || has(n, "b128")) return 16;
  if (has(n, "x3") || has(n, "b96")) return 12;
  if (has(n, "x2") || has(n, "b64")) return 8;
  if (has(n, "byte") || has(n, "_u8") || has(n, "_i8") || has(n, "_b8")) return 1;
  if (has(n, "short") || has(n, "_u16") || has(n, "_i16") || has(n, "_b16") || has(n, "d16")) return 2;
  return 4;
}

static bool is_trans_name(const std::string& n) {
  static const char* t[] = {"v_exp_", "v_log_", "v_rcp_", "v_rsq_", "v_sqrt_", "v_sin_", "v_cos_"};
  for (auto p : t) if (n.rfind(p, 0) == 0) return true;
  return false;
}

const TraceStatic& Tracer::stat(int idx, const Inst& in) {
  if ((int)statics.size() <= idx) statics.resize(idx + 1);
  TraceStatic& s = statics[idx];
  if (s.known) return s;
  s.known = true;
  s.name = in.row ? in.row->name : std::string("?");
  s.pc = in.pc;
  auto rd = [&](uint16_t code, int bits) {
    if (code == OPC_NONE || s.nrd >= 8) return;
    if (code >= 128 && code < OPC_VGPR) return;  // constants, literals, SCC-like specials
    s.rd[s.nrd] = code; s.rdn[s.nrd] = (uint8_t)std::max(1, (bits + 31) / 32); s.nrd++;
  };
  auto wr = [&](uint16_t code, int bits) {
    if (code == OPC_NONE || s.nwr >= 3 || (code >= 128 && code < OPC_VGPR)) return;
    s.wr[s.nwr] = code; s.wrn[s.nwr] = (uint8_t)std::max(1, (bits + 31) / 32); s.nwr++;
  };
  switch (in.enc) {
    case ENC_SOPP:
      switch (in.op) {
        case 12: s.pipe = TP_WAITCNT; {
          uint32_t v = (uint16_t)in.simm;
          s.vm = (int)((v & 0xf) | (((v >> 14) & 3) << 4)); s.lgkm = (int)((v >> 8) & 0xf);
        } break;
        case 10: s.pipe = TP_BARRIER; break;
        case 0: s.pipe = TP_NOP; s.nop = (in.simm & 0xf) + 1; break;
        case 15: s.pipe = TP_SETPRIO; s.prio = in.simm & 3; break;
        case 1: s.pipe = TP_END; break;
        case 2: case 4: case 5: case 6: case 7: case 8: case 9: s.pipe = TP_BRANCH; break;
        default: s.pipe = TP_SALU; break;
      }
      if (in.op >= 4 && in.op <= 9) { rd(106, 64); rd(126, 64); }
      break;
    case ENC_SOP1: case ENC_SOP2: case ENC_SOPC: case ENC_SOPK:
      s.pipe = (in.enc == ENC_SOP1 && (in.op == 29 || in.op == 30)) ? TP_BRANCH : TP_SALU;
      s.latency = cfg_.salu_latency;
      for (int i = 0; i < 2; i++) rd(in.src[i], in.nbits[i]);
      wr(in.sdst != OPC_NONE ? in.sdst : in.dst, in.dst_bits);
      break;
    case ENC_SMEM: s.pipe = TP_SMEM; rd(in.sbase, 64); break;
    case ENC_VOP1: case ENC_VOP2: case ENC_VOPC: case ENC_VOP3: case ENC_VOP3P: case ENC_VOP3PX2: {
      const MfmaInfo* mi = static_cast<const MfmaInfo*>(in.mfma);
      if (!mi && (in.enc == ENC_VOP3P || in.enc == ENC_VOP3PX2) && s.name.rfind("v_mfma", 0) == 0)
        mi = mfma_lookup(s.name.c_str(), gfx950_);
      if (!mi && (in.enc == ENC_VOP3P || in.enc == ENC_VOP3PX2) && s.name.rfind("v_smfmac", 0) == 0)
        mi = mfma_lookup(s.name.c_str(), gfx950_);
      if (mi) {
        // gfx950 f8f6f4 forms (16x16x128, 32x32x64, scaled or not): the table's passes hold when A or B is
        // fp8/bf8 (CBSZ/BLGP 0-1); with both operands fp6/bf6/fp4 they take half as many (LLVM
        // SISchedule.td, SIDPGFX950FullSpeedModel: WriteMFMAScale_16X16X128_F8F6F4 = 8 passes if
        // PredIsF8_MFMA_SCALE else 4; 32X32X64 16 else 8; docs/performance.md)
        int passes = mi->passes;
        if (mi->a_type == MfmaType::F8F6F4 && in.cbsz > 1 && in.blgp > 1) passes /= 2;
        s.pipe = TP_MFMA; s.cycles = 4 * passes; s.latency = 4 * passes + cfg_.mfma_extra_latency;
        // co-execution after an XDL MFMA (slots of 4 clocks from its issue): VALU at 1 + widest A/B
        // source bytes / 16 (the registers the formats read), packed-f32 VALU and DOT at passes + 2;
        // SGEMM / DGEMM hold all VALU to passes + 2
        bool xgemm = mi->a_type == MfmaType::F32 || mi->a_type == MfmaType::F64;
        s.pk_hold = passes + 2;
        s.valu_hold = xgemm ? passes + 2 : 1 + (4 * std::max(mfma_a_regs(*mi, in.cbsz), mfma_b_regs(*mi, in.blgp))) / 16;
      } else if (is_trans_name(s.name)) {
        s.pipe = TP_TRANS; s.cycles = cfg_.trans_cycles; s.latency = cfg_.trans_latency;
      } else {
        s.pipe = TP_VALU; s.cycles = cfg_.valu_cycles; s.latency = cfg_.valu_latency;
        s.pk_f32 = s.name.rfind("v_pk_fma_f32", 0) == 0 || s.name.rfind("v_pk_mul_f32", 0) == 0 ||
                   s.name.rfind("v_pk_add_f32", 0) == 0 || s.name.rfind("v_pk_mov_b32", 0) == 0 ||
                   s.name.rfind("v_dot", 0) == 0;
      }
      for (int i = 0; i < 3; i++) rd(in.src[i], in.nbits[i]);
      wr(in.dst, in.dst_bits);
      if (in.sdst != OPC_NONE && in.sdst < 128) wr(in.sdst, 64);
      break;
    }
    case ENC_DS:
      s.pipe = TP_LDS;
      rd(in.src[0], 32); rd(in.src[1], in.nbits[1]); rd(in.src[2], in.nbits[2]);
      break;
    case ENC_FLAT: case ENC_GLOBAL: case ENC_SCRATCH: case ENC_MUBUF: case ENC_MTBUF:
      s.pipe = TP_VMEM;
      s.store = has(s.name, "store");
      s.vmem_lds = in.lds || has(s.name, "_lds_");
      rd(in.src[0], in.nbits[0]);
      if (s.store) rd(in.src[1], in.nbits[1]);
      if (in.enc == ENC_MUBUF || in.enc == ENC_MTBUF) rd(in.srsrc, 128);
      break;
    default: s.pipe = TP_OTHER; break;
  }
  return s;
}

// LDS cycles of one DS instruction: lanes are served in groups that move lds_bytes_per_clk; a group
// takes as many cycles as the most distinct dwords any one bank must deliver (equal dwords broadcast).
// The groups are consecutive lanes, except for ds_read_b128 with lds_b128_read_phases: CDNA 3 serves it in
// 8 phases of two 4-lane runs each (lanes 0-3 + 20-23, 4-7 + 16-19, 8-11 + 28-31, 12-15 + 24-27, and the
// same + 32), so only lanes of one phase can conflict (docs/performance.md).
static const int kB128ReadPhases[8][8] = {
    {0, 1, 2, 3, 20, 21, 22, 23},     {4, 5, 6, 7, 16, 17, 18, 19},     {8, 9, 10, 11, 28, 29, 30, 31},
    {12, 13, 14, 15, 24, 25, 26, 27}, {32, 33, 34, 35, 52, 53, 54, 55}, {36, 37, 38, 39, 48, 49, 50, 51},
    {40, 41, 42, 43, 60, 61, 62, 63}, {44, 45, 46, 47, 56, 57, 58, 59}};

// lds_b128_read_phases 2 (CDNA 4, 64 banks at 256 B/clk): 4 phases of 16 lanes, lanes 0-3 + 12-15 + 20-27 and
// 4-11 + 16-19 + 28-31, the same + 32 (measured with rocprofv3 bank-conflict counters by HipKittens' paper
// experiments; docs/performance.md).
static const int kB128ReadPhases950[4][16] = {
    {0, 1, 2, 3, 12, 13, 14, 15, 20, 21, 22, 23, 24, 25, 26, 27},
    {4, 5, 6, 7, 8, 9, 10, 11, 16, 17, 18, 19, 28, 29, 30, 31},
    {32, 33, 34, 35, 44, 45, 46, 47, 52, 53, 54, 55, 56, 57, 58, 59},
    {36, 37, 38, 39, 40, 41, 42, 43, 48, 49, 50, 51, 60, 61, 62, 63}};

static uint32_t lds_cycles(const TimingConfig& cfg, const std::vector<uint32_t>& addr, int bytes, uint64_t exec,
                           bool read_b128 = false) {
  if (!exec) return 1;
  int per_group = std::max(1, cfg.lds_bytes_per_clk / std::max(4, bytes));
  const bool phases = read_b128 && ((cfg.lds_b128_read_phases == 1 && per_group == 8) ||
                                    (cfg.lds_b128_read_phases == 2 && per_group == 16));
  uint32_t total = 0;
  std::vector<uint32_t> dw;
  std::vector<int> cnt(cfg.lds_banks);
  for (int g0 = 0, g = 0; g0 < 64; g0 += per_group, g++) {
    dw.clear();
    for (int j = 0; j < per_group && g0 + j < 64; j++) {
      int l = !phases ? g0 + j : per_group == 8 ? kB128ReadPhases[g][j] : kB128ReadPhases950[g][j];
      if (!((exec >> l) & 1)) continue;
      for (int b = 0; b < std::max(4, bytes); b += 4) dw.push_back((addr[l] + b) >> 2);
    }
    if (dw.empty()) continue;
    std::sort(dw.begin(), dw.end());
    dw.erase(std::unique(dw.begin(), dw.end()), dw.end());
    std::fill(cnt.begin(), cnt.end(), 0);
    int mx = 0;
    for (uint32_t d : dw) mx = std::max(mx, ++cnt[d % cfg.lds_banks]);
    total += (uint32_t)mx;
  }
  return std::max<uint32_t>(total, 1);
}

void Tracer::on_inst(int wave, int idx, const Inst& in, const uint32_t* sg, const uint32_t* vr, uint64_t exec) {
  if (!cur_) return;
  const TraceStatic& s = stat(idx, in);
  // an s_waitcnt that yielded to the other waves (direct-to-LDS landing) executes again: record it once
  auto& recs = cur_->waves[wave].recs;
  if (s.pipe == TP_WAITCNT && !recs.empty() && recs.back().idx == idx) return;
  TraceRec r{idx, 0, 0};
  auto row = [&](uint16_t code) { return vr + (size_t)(code - OPC_VGPR) * 64; };
  if (s.pipe == TP_LDS) {
    const std::string& n = s.name;
    bool perm = has(n, "permute") || has(n, "swizzle") || in.src[0] == OPC_NONE;
    if (perm) {
      r.aux = 2;  // cross-lane crossbar, no bank access: 64 lanes x 4 B at 128 B/clk
      r.naux = 256;
    } else {
      const uint32_t* a = row(in.src[0]);
      std::vector<uint32_t> addr(64);
      bool two = has(n, "read2") || has(n, "write2");
      if (two) {
        int el = has(n, "b64") ? 8 : 4;
        uint32_t sc = has(n, "st64") ? (uint32_t)el * 64 : (uint32_t)el;
        uint32_t c = 0;
        for (uint32_t o : {in.offset * sc, in.offset1 * sc}) {
          for (int l = 0; l < 64; l++) addr[l] = a[l] + o;
          c += lds_cycles(cfg_, addr, el, exec);
        }
        r.aux = c; r.naux = (uint32_t)(2 * el * __builtin_popcountll(exec));
        lds_ideal_cycles += (uint64_t)std::max<uint64_t>(1, (r.naux + cfg_.lds_bytes_per_clk - 1) / cfg_.lds_bytes_per_clk);
      } else {
        int el = access_bytes(n);
        uint32_t off = in.offset | (in.offset1 << 8);
        for (int l = 0; l < 64; l++) addr[l] = a[l] + off;
        r.aux = lds_cycles(cfg_, addr, el, exec, el == 16 && has(n, "read"));
        r.naux = (uint32_t)(std::max(4, el) * __builtin_popcountll(exec));
        lds_ideal_cycles += (uint64_t)std::max<uint64_t>(1, (r.naux + cfg_.lds_bytes_per_clk - 1) / cfg_.lds_bytes_per_clk);
      }
      lds_conflict_cycles += r.aux;
    }
  } else if (s.pipe == TP_VMEM) {
    int bytes = access_bytes(s.name);
    size_t first = lines.size();
    const uint64_t lb = (uint64_t)cfg_.line_bytes;
    auto add_range = [&](uint64_t a, uint64_t n) {
      const uint64_t t = traced_address(a);
      for (uint64_t x = t / lb; x <= (t + n - 1) / lb; x++) lines.push_back(x);
    };
    auto add = [&](uint64_t a) { add_range(a, (uint64_t)bytes); };
    uint64_t m = exec;
    if (in.enc == ENC_MUBUF || in.enc == ENC_MTBUF) {
      const uint32_t* rs = sg + in.srsrc;
      uint64_t base = rs[0] | ((uint64_t)(rs[1] & 0xffff) << 32);
      uint32_t stride = (rs[1] >> 16) & 0x3fff;
      const uint64_t num = rs[2];
      const bool add_tid = (rs[3] >> 23) & 1;
      uint32_t soff = in.soffset < 128 ? sg[in.soffset] : (in.is_const[3] ? (uint32_t)in.cval[3] : 0);
      const uint32_t* va = in.src[0] != OPC_NONE ? row(in.src[0]) : nullptr;
      const uint32_t* va1 = in.src[0] != OPC_NONE ? row((uint16_t)(in.src[0] + 1)) : nullptr;
      while (m) {
        int l = __builtin_ctzll(m); m &= m - 1;
        uint32_t idx2 = 0, voff = 0;
        if (va && in.idxen && in.offen) { idx2 = va[l]; voff = va1[l]; }
        else if (va && in.idxen) idx2 = va[l];
        else if (va && in.offen) voff = va[l];
        // the executor's range check (exec.cpp): an out-of-range access reads zeros / is dropped and touches no
        // memory, so it is not traced; a raw access partly in range touches its in-range bytes
        const uint64_t off = (uint64_t)(uint32_t)(voff + in.offset) + soff;
        uint64_t n = (uint64_t)bytes;
        if (!add_tid) {
          if (stride != 0 && in.idxen) {
            if (idx2 >= num) continue;
          } else {
            if (off >= num) continue;
            n = std::min<uint64_t>(n, num - off);
          }
        }
        add_range(base + off + (uint64_t)stride * idx2, n);
      }
    } else if (in.src[0] != OPC_NONE) {
      const uint32_t* a0 = row(in.src[0]);
      const uint32_t* a1 = in.nbits[0] == 64 ? row((uint16_t)(in.src[0] + 1)) : nullptr;
      uint64_t sbase = (in.saddr != 0x7f && in.saddr < 127) ? (sg[in.saddr] | ((uint64_t)sg[in.saddr + 1] << 32)) : 0;
      while (m) {
        int l = __builtin_ctzll(m); m &= m - 1;
        uint64_t ga = (in.saddr != 0x7f && in.saddr < 127) ? sbase + a0[l] : (a1 ? (a0[l] | ((uint64_t)a1[l] << 32)) : a0[l]);
        add(ga + (int64_t)(int32_t)in.offset);
      }
    }
    std::sort(lines.begin() + first, lines.end());
    lines.erase(std::unique(lines.begin() + first, lines.end()), lines.end());
    size_t n = lines.size() - first;
    if (n >= (1u << 24)) throw EmuError("timing trace: one VMEM instruction touched more than 2^24 lines");
    // naux: lines touched (low 24 bits) and active lanes (high 8 bits), for the addresser cost
    r.aux = (uint32_t)first;
    r.naux = (uint32_t)n | ((uint32_t)__builtin_popcountll(exec) << 24);
    cur_->waves[wave].recs.push_back(r);
    return;
  }
  cur_->waves[wave].recs.push_back(r);
}

// ============================================================================ cache model
struct Cache {
  int sets = 1, ways = 1;
  std::vector<uint64_t> tag, last;
  uint64_t tick = 0, hits = 0, misses = 0;
  Cache(int bytes, int ways_, int line) {
    ways = std::max(1, ways_);
    sets = std::max(1, bytes / line / ways);
    tag.assign((size_t)sets * ways, ~0ull);
    last.assign((size_t)sets * ways, 0);
  }
  bool access(uint64_t line) {  // true: hit (LRU within the set)
    size_t s = (size_t)(line % (uint64_t)sets) * ways;
    tick++;
    size_t victim = s;
    for (int w = 0; w < ways; w++) {
      if (tag[s + w] == line) { last[s + w] = tick; hits++; return true; }
      if (last[s + w] < last[victim]) victim = s + w;
    }
    tag[victim] = line; last[victim] = tick; misses++;
    return false;
  }
};

// ============================================================================ simulator
namespace {

constexpr int kWgWaves = 16;  // waves of a 1024-thread workgroup (the per-wave stall counts)

enum Cause { C_ISSUE, C_WAIT_VM, C_WAIT_LGKM, C_BARRIER, C_DEP, C_PIPE_BUSY, C_ARB, C_NOP, C_BRANCH, C_COUNT };
const char* kCause[C_COUNT] = {"issued", "waitcnt_vm", "waitcnt_lgkm", "barrier", "dependency", "pipe_busy",
                               "arbitration", "nop", "branch"};
const char* kPipe[TP_COUNT] = {"valu", "trans", "mfma", "salu", "smem", "lds", "vmem", "branch", "waitcnt",
                               "barrier", "nop", "setprio", "end", "other"};

struct SimWave {
  const TracedWave* tw = nullptr;
  size_t pos = 0;
  int simd = 0, wg = -1;
  uint64_t ready = 0, age = 0;
  int prio = 0, cause = C_ISSUE;
  bool done = false, at_barrier = false;
  std::vector<uint64_t> vm, ds, sm;  // completion times of outstanding ops (vm, ds in order)
  std::vector<uint64_t> reg, chain;  // per operand code: readable / readable as MFMA SrcC
  std::vector<int> writer;           // per operand code: static index of the last writer (-1: none)
  int dep_from = -1;                 // the writer a dependency wait waits for
  int index = 0;                     // wave index within its workgroup
};

struct SimWG { int trace = -1; int alive = 0, arrived = 0; uint64_t start = 0, end = 0; std::vector<int> waves; };

struct SimCU {
  std::vector<int> queue; size_t qpos = 0;
  std::vector<SimWG> res;  // resident workgroups (slot)
  uint64_t valu_free[8] = {0}, mfma_free[8] = {0};
  uint64_t valu_hold[8] = {0}, pk_hold[8] = {0};  // VALU / packed-f32 VALU issue held off by an MFMA
  uint64_t lds_free = 0, ta_free = 0, end = 0;
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  Cache l1;
  std::vector<SimWave> waves;
  explicit SimCU(const TimingConfig& c) : l1(c.l1_bytes, c.l1_ways, c.line_bytes) {}
};

static int category(int pipe) {
  switch (pipe) {
    case TP_VALU: case TP_TRANS: case TP_MFMA: return 0;  // VALU and MFMA share the vector issue port
    case TP_SALU: case TP_SMEM: return 1;  // SMEM issues through the SALU (rocprofiler-compute CU docs)
    case TP_LDS: return 3;
    case TP_VMEM: return 4;
    case TP_BRANCH: return 5;
    default: return 6;
  }
}

}  // namespace

TimingReport simulate(const Tracer& tr, const TimingConfig& cfg, const std::vector<std::vector<int>>& cus, int slots) {
  TimingReport rep;
  const int NREG = 768;
  const int S = cfg.simds_per_cu, P = cfg.issue_period;
  int ncu = (int)cus.size();
  std::vector<SimCU> cu;
  cu.reserve(ncu);
  for (int c = 0; c < ncu; c++) { cu.emplace_back(cfg); cu.back().queue = cus[c]; }
  Cache l2(cfg.l2_bytes, cfg.l2_ways, cfg.line_bytes);
  // the simulated CUs' share of the XCD's L2 bandwidth and of the chip's HBM bandwidth, among the launch's
  // busy CUs (every CU unless cfg.busy_cus says fewer; never fewer than the simulated ones)
  const int busy = std::max(ncu, cfg.busy_cus > 0 ? std::min(cfg.busy_cus, cfg.cus_per_chip) : cfg.cus_per_chip);
  const int xcds = std::max(1, cfg.xcds);
  const int cus_per_xcd = std::max(1, (busy + xcds - 1) / xcds);  // (304 / 8 = 38, 256 / 8 = 32: whole XCDs)
  double l2_rate = cfg.l2_bytes_per_clk_per_xcd * std::min(ncu, cus_per_xcd) / cus_per_xcd;  // bytes/clk
  double hbm_rate = cfg.hbm_bytes_per_s / (cfg.clock_mhz * 1e6) * ncu / busy;
  double l2_free = 0, hbm_free = 0;
  uint64_t hbm_lines = 0, mall_lines = 0;
  double cause_cycles[C_COUNT] = {0};
  std::vector<std::array<double, C_COUNT>> inst_cycles(tr.statics.size() * kWgWaves);  // [static index][wave index]
  std::map<std::pair<int, int>, double> dep_pairs;                           // (waiting, writer) static indices
  double pipe_busy[TP_COUNT] = {0};
  uint64_t age = 0, ninst = 0;

  auto launch_wgs = [&](SimCU& C, uint64_t t) {
    for (;;) {
      int live = 0;
      for (auto& g : C.res) if (g.trace >= 0) live++;
      if (live >= slots || C.qpos >= C.queue.size()) return;
      int ti = C.queue[C.qpos++];
      const TracedWorkgroup& tw = tr.wgs.at(ti);
      SimWG g; g.trace = ti; g.start = t; g.alive = (int)tw.waves.size();
      int gi = -1;
      for (size_t i = 0; i < C.res.size(); i++) if (C.res[i].trace < 0) { gi = (int)i; break; }
      if (gi < 0) { C.res.push_back(g); gi = (int)C.res.size() - 1; } else C.res[gi] = g;
      for (size_t w = 0; w < tw.waves.size(); w++) {
        SimWave sw;
        // The SIMD with the fewest waves of resident workgroups (lowest index on a tie): a workgroup's waves go
        // round-robin, and co-resident one-wave workgroups spread over the SIMDs as occupancy() counts them
        // (with w % S every one-wave workgroup shared SIMD 0). Workgroups of 4k waves place as w % S.
        int load[8] = {0};
        for (const SimWave& o : C.waves) if (o.wg >= 0) load[o.simd]++;
        int pick = 0;
        for (int s2 = 1; s2 < S; s2++) if (load[s2] < load[pick]) pick = s2;
        sw.tw = &tw.waves[w]; sw.index = std::min((int)w, kWgWaves - 1); sw.simd = pick; sw.wg = gi; sw.age = age++;
        sw.ready = t + cfg.wg_launch_cycles;
        sw.reg.assign(NREG, 0); sw.chain.assign(NREG, 0); sw.writer.assign(NREG, -1);
        if (sw.tw->recs.empty()) { sw.done = true; C.res[gi].alive--; }
        int slot = -1;
        for (size_t i = 0; i < C.waves.size(); i++) if (C.waves[i].done && C.waves[i].wg < 0) { slot = (int)i; break; }
        if (slot < 0) { C.waves.push_back(std::move(sw)); slot = (int)C.waves.size() - 1; } else C.waves[slot] = std::move(sw);
        C.res[gi].waves.push_back(slot);
      }
    }
  };
  for (auto& C : cu) launch_wgs(C, 0);

  auto finish_wg = [&](SimCU& C, int gi, uint64_t t) {
    SimWG& g = C.res[gi];
    g.end = t;
    C.spans.emplace_back(g.start, t);
    C.end = std::max(C.end, t);
    for (int wi : g.waves) C.waves[wi].wg = -1;
    g.trace = -1; g.waves.clear();
    launch_wgs(C, t);
  };

  std::vector<int> order;
  uint64_t t = 0;
  int active = ncu;
  const uint64_t kMaxCycles = 40000000000ull;
  while (active > 0) {
    int simd = (int)(t % (uint64_t)P);
    if (simd < S) {
      for (int c = 0; c < ncu; c++) {
        SimCU& C = cu[c];
        order.clear();
        for (size_t i = 0; i < C.waves.size(); i++)
          if (!C.waves[i].done && C.waves[i].simd == simd) order.push_back((int)i);
        std::sort(order.begin(), order.end(), [&](int a, int b) {
          if (C.waves[a].prio != C.waves[b].prio) return C.waves[a].prio > C.waves[b].prio;
          return C.waves[a].age < C.waves[b].age;
        });
        bool used[7] = {false, false, false, false, false, false, false};
        for (int wi : order) {
          SimWave& w = C.waves[wi];
          // every count below is for the wave's next instruction (its stall or issue window)
          const int next = w.pos < w.tw->recs.size() ? w.tw->recs[w.pos].idx : -1;
          auto count = [&](int cause) {
            cause_cycles[cause] += P;
            if (next >= 0) inst_cycles[(size_t)next * kWgWaves + w.index][cause] += P;
            if (cause == C_DEP && next >= 0) dep_pairs[{next, w.dep_from}] += P;
          };
          if (w.at_barrier) { count(C_BARRIER); continue; }
          if (w.ready > t) { count(w.cause); continue; }
          const TraceRec& r = w.tw->recs[w.pos];
          const TraceStatic& st = tr.statics[r.idx];
          SimWG& g = C.res[w.wg];
          // --- instructions handled in the instruction buffer
          if (st.pipe == TP_WAITCNT) {
            auto prune = [&](std::vector<uint64_t>& q) { q.erase(std::remove_if(q.begin(), q.end(), [&](uint64_t x) { return x <= t; }), q.end()); };
            prune(w.vm); prune(w.ds); prune(w.sm);
            uint64_t need = t; int cause = C_ISSUE;
            if ((int)w.vm.size() > st.vm) { need = std::max(need, w.vm[w.vm.size() - st.vm - 1]); cause = C_WAIT_VM; }
            size_t nl = w.ds.size() + w.sm.size();
            if ((int)nl > st.lgkm) {
              std::vector<uint64_t> all(w.ds); all.insert(all.end(), w.sm.begin(), w.sm.end());
              std::sort(all.begin(), all.end());
              uint64_t x = all[nl - st.lgkm - 1];
              if (x > need) { need = x; cause = C_WAIT_LGKM; }
            }
            if (need > t) { w.ready = need; w.cause = cause; count(cause); continue; }
            w.pos++; w.ready = t + 1; count(C_ISSUE); ninst++;
            continue;
          }
          if (st.pipe == TP_BARRIER) {
            w.pos++; ninst++; count(C_ISSUE);
            w.at_barrier = true; g.arrived++;
            if (g.arrived >= g.alive) {
              for (int x : g.waves) {
                SimWave& o = C.waves[x];
                if (o.at_barrier) { o.at_barrier = false; o.ready = t + cfg.barrier_latency; o.cause = C_BARRIER; }
              }
              g.arrived = 0;
            }
            continue;
          }
          if (st.pipe == TP_NOP) {
            w.pos++; ninst++; count(C_ISSUE);
            w.ready = t + (uint64_t)st.nop * cfg.nop_cycles_per_wait_state; w.cause = C_NOP;
            continue;
          }
          if (st.pipe == TP_SETPRIO) { w.pos++; ninst++; w.prio = st.prio; w.ready = t + 1; count(C_ISSUE); continue; }
          if (st.pipe == TP_END) {
            w.pos++; ninst++; w.done = true; count(C_ISSUE);
            g.alive--;
            // a wave that ends releases a barrier the others wait at
            if (g.alive > 0 && g.arrived >= g.alive) {
              for (int x : g.waves) {
                SimWave& o = C.waves[x];
                if (o.at_barrier) { o.at_barrier = false; o.ready = t + cfg.barrier_latency; o.cause = C_BARRIER; }
              }
              g.arrived = 0;
            }
            if (g.alive == 0) finish_wg(C, w.wg, t);
            continue;
          }
          // --- register dependencies (in-order issue)
          uint64_t dep = 0;
          for (int i = 0; i < st.nrd; i++) {
            bool srcc = st.pipe == TP_MFMA && i == 2;
            for (int k = 0; k < st.rdn[i] && st.rd[i] + k < NREG; k++)
            {
              const int reg = st.rd[i] + k;
              const uint64_t x = srcc ? w.chain[reg] : w.reg[reg];
              if (x > dep) { dep = x; w.dep_from = w.writer[reg]; }
            }
          }
          if (dep > t) { w.ready = dep; w.cause = C_DEP; count(C_DEP); continue; }
          int cat = category(st.pipe);
          if (used[cat]) { count(C_ARB); continue; }
          // --- structural: the pipeline must be free
          uint64_t busy = 0;
          if (st.pipe == TP_VALU || st.pipe == TP_TRANS)
            busy = std::max(C.valu_free[simd], st.pk_f32 ? C.pk_hold[simd] : C.valu_hold[simd]);
          else if (st.pipe == TP_MFMA) busy = C.mfma_free[simd];
          if (busy > t) { w.ready = busy; w.cause = C_PIPE_BUSY; count(C_PIPE_BUSY); continue; }
          // --- issue
          used[cat] = true;
          w.pos++; ninst++; count(C_ISSUE);
          w.ready = t + 1; w.cause = C_ISSUE;
          auto write = [&](uint64_t when, uint64_t chain_when) {
            for (int i = 0; i < st.nwr; i++)
              for (int k = 0; k < st.wrn[i] && st.wr[i] + k < NREG; k++) {
                w.reg[st.wr[i] + k] = when; w.chain[st.wr[i] + k] = chain_when; w.writer[st.wr[i] + k] = r.idx;
              }
          };
          switch (st.pipe) {
            case TP_VALU: case TP_TRANS:
              C.valu_free[simd] = t + st.cycles; pipe_busy[st.pipe] += st.cycles;
              write(t + st.latency, t + st.latency);
              break;
            case TP_MFMA:
              C.mfma_free[simd] = t + st.cycles; pipe_busy[TP_MFMA] += st.cycles;
              if (cfg.mfma_coexec) {
                C.valu_hold[simd] = std::max(C.valu_hold[simd], t + (uint64_t)st.valu_hold * P);
                C.pk_hold[simd] = std::max(C.pk_hold[simd], t + (uint64_t)st.pk_hold * P);
              }
              write(t + st.latency, t + st.cycles);
              break;
            case TP_SALU: case TP_OTHER:
              pipe_busy[TP_SALU] += P;
              write(t + cfg.salu_latency, t + cfg.salu_latency);
              break;
            case TP_BRANCH: {
              pipe_busy[TP_BRANCH] += P;
              bool taken = w.pos < w.tw->recs.size() && w.tw->recs[w.pos].idx != r.idx + 1;
              if (taken) { w.ready = t + cfg.branch_taken_cycles; w.cause = C_BRANCH; }
              break;
            }
            case TP_SMEM: w.sm.push_back(t + cfg.smem_latency); break;
            case TP_LDS: {
              uint64_t start = std::max(t, C.lds_free);
              C.lds_free = start + r.aux; pipe_busy[TP_LDS] += r.aux;
              uint64_t done = start + r.aux + cfg.lds_latency;
              if (!w.ds.empty()) done = std::max(done, w.ds.back());
              w.ds.push_back(done);
              break;
            }
            case TP_VMEM: {
              uint32_t nlines = r.naux & 0xffffff, lanes = r.naux >> 24;
              int bytes = access_bytes(st.name);
              uint64_t ta = std::max<uint64_t>(nlines, ((uint64_t)lanes * bytes + cfg.vmem_bytes_per_clk - 1) / cfg.vmem_bytes_per_clk);
              uint64_t start = std::max(t, C.ta_free);
              C.ta_free = start + std::max<uint64_t>(ta, 1); pipe_busy[TP_VMEM] += (double)std::max<uint64_t>(ta, 1);
              uint64_t done = start + ta;
              for (uint32_t i = 0; i < nlines; i++) {
                uint64_t line = tr.lines[r.aux + i];
                uint64_t lat;
                if (!st.store && C.l1.access(line)) lat = cfg.l1_latency;
                else {
                  double s2 = std::max((double)start, l2_free);
                  l2_free = s2 + cfg.line_bytes / l2_rate;
                  if (l2.access(line) || st.store) lat = cfg.l2_latency + (uint64_t)(s2 - start);
                  else {
                    bool mall = (double)((hbm_lines + mall_lines) % 1000) < cfg.mall_hit_rate * 1000.0;
                    if (mall) { mall_lines++; lat = cfg.mall_latency + (uint64_t)(s2 - start); }
                    else {
                      double s3 = std::max(s2, hbm_free);
                      hbm_free = s3 + cfg.line_bytes / hbm_rate;
                      hbm_lines++;
                      lat = cfg.hbm_latency + (uint64_t)(s3 - start);
                    }
                  }
                }
                done = std::max(done, start + lat);
              }
              if (!w.vm.empty()) done = std::max(done, w.vm.back());
              w.vm.push_back(done);
              break;
            }
            default: break;
          }
        }
      }
    }
    active = 0;
    for (auto& C : cu) {
      bool busy = C.qpos < C.queue.size();
      for (auto& g : C.res) if (g.trace >= 0) busy = true;
      if (busy) active++;
    }
    t++;
    if (t > kMaxCycles) throw EmuError("timing simulation exceeded its cycle budget (deadlock in the trace?)");
  }
  for (auto& C : cu) { rep.cu_cycles.push_back(C.end); rep.wg_spans.push_back(C.spans); }
  for (int i = 0; i < C_COUNT; i++) rep.stall[kCause[i]] = cause_cycles[i];
  for (size_t x = 0; x < inst_cycles.size(); x++)
    for (int i = 0; i < C_COUNT; i++)
      if (inst_cycles[x][i] > 0) rep.stall_by_pc[{(int)(x % kWgWaves), tr.statics[x / kWgWaves].pc}][kCause[i]] += inst_cycles[x][i];
  for (auto& [k, v] : dep_pairs)
    rep.dep_by_pair[{tr.statics[k.first].pc, k.second >= 0 ? tr.statics[k.second].pc : ~0u}] += v;
  for (int i = 0; i < TP_COUNT; i++) if (pipe_busy[i] > 0) rep.pipe_busy[kPipe[i]] = pipe_busy[i];
  uint64_t l1h = 0, l1m = 0;
  for (auto& C : cu) { l1h += C.l1.hits; l1m += C.l1.misses; }
  rep.mem["l1_hits"] = (double)l1h; rep.mem["l1_misses"] = (double)l1m;
  rep.mem["l2_hits"] = (double)l2.hits; rep.mem["l2_misses"] = (double)l2.misses;
  rep.mem["hbm_bytes"] = (double)hbm_lines * cfg.line_bytes; rep.mem["mall_bytes"] = (double)mall_lines * cfg.line_bytes;
  rep.mem["unmapped_accesses"] = (double)tr.unmapped_accesses;
  rep.mem["lds_cycles"] = (double)tr.lds_conflict_cycles; rep.mem["lds_ideal_cycles"] = (double)tr.lds_ideal_cycles;
  rep.instructions = ninst;
  return rep;
}

}  // namespace mmemu
