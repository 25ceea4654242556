// moonmath-emu: a trace-driven timing model of CDNA3 (MI300X) / CDNA4 (MI355X) compute units.
//
// The executor runs the kernel (functional results unchanged) and, through the TraceSink hook, records
// for the chosen workgroups each wave's dynamic instruction stream with the facts timing needs: the
// static instruction (pipeline, registers read/written, MFMA passes, s_waitcnt counts, s_nop,
// s_setprio, s_barrier), the LDS bank-conflict cycles computed from the real lane addresses, and the
// global 128-byte lines a VMEM access touches. A separate cycle simulator then replays the recorded
// streams on a few CUs (4 SIMDs each, per-SIMD issue arbitration, pipelines, scoreboard, memory
// latency and bandwidth, L1/L2 from the real address stream). Trace-driven is valid because a wave's
// control flow does not depend on timing (spin-waits on other workgroups are the exception).
// Every constant is in TimingConfig and documented with its source in docs/performance.md.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "timing_hook.hpp"

namespace mmemu {

struct TimingConfig {
  // ---- machine
  int cus_per_chip = 304, xcds = 8;
  double clock_mhz = 2100;             // engine clock used to turn cycles into seconds
  int simds_per_cu = 4;
  int issue_period = 4;                // each SIMD gets an issue window every 4 cycles (round robin)
  int vgprs_per_simd_lane = 512;       // unified VGPR+AGPR file per lane per SIMD
  int max_waves_per_simd = 8;
  int lds_bytes_per_cu = 65536;
  int lds_banks = 32;                  // 4-byte banks
  int lds_bytes_per_clk = 128;
  int lds_b128_read_phases = 1;        // 1: ds_read_b128 conflicts only within CDNA 3's documented 8-lane
                                       // phases (0-3 + 20-23, ...); 2: CDNA 4's measured 16-lane phases
                                       // (0-3 + 12-15 + 20-27, ...); 0: within consecutive lanes
  // ---- pipelines (cycles)
  int valu_cycles = 4;                 // wave64 on a 16-lane SIMD
  int trans_cycles = 16;               // transcendental (quarter rate)
  int valu_latency = 4;                // result usable by the next dependent VALU window
  int trans_latency = 16;
  int mfma_extra_latency = 16;         // result ready 4 * passes + this after issue: an XDL result needs
                                       // passes + 3 wait states before a VALU/memory read (LLVM
                                       // GCNHazardRecognizer, gfx940), the reader issuing one slot later
  int salu_latency = 4;
  int branch_taken_cycles = 8;         // refetch after a taken branch
  int barrier_latency = 8;
  int nop_cycles_per_wait_state = 4;   // s_nop N idles the wave N + 1 wait states of one issue slot each
                                       // (4 cycles: s_nop 10 measured 44 cycles in an ATT trace on gfx942)
  int wg_launch_cycles = 200;          // workgroup dispatch + wave init on a CU
  // ---- memory
  int lds_latency = 64;
  int smem_latency = 64;
  int vmem_bytes_per_clk = 64;         // texture-addresser / L1 data path per CU
  int l1_bytes = 32768, l1_ways = 8, line_bytes = 128;
  int l1_latency = 120;
  int l2_bytes = 4 << 20, l2_ways = 16;
  int l2_latency = 250;
  int mall_latency = 460;              // Infinity Cache (MALL) hit
  int hbm_latency = 700;
  double hbm_bytes_per_s = 5.3e12;
  double l2_bytes_per_clk_per_xcd = 2048;  // 16 channels x 128 B
  double mall_hit_rate = 0.0;          // fraction of L2 misses served by the MALL
  double kernel_launch_us = 0.0;       // fixed per-kernel overhead added by the composer
  int mfma_coexec = 1;                 // 1: VALU held off after an MFMA issue (LLVM's thread-trace rules)
  // CUs the modeled launch keeps busy (0: every CU of the chip). The simulated CUs' shares of HBM and of their
  // XCD's L2 bandwidth are of these: a launch with fewer workgroups than CUs leaves the others' shares unused
  // (each CU still capped by its own vmem_bytes_per_clk).
  int busy_cus = 0;
};

// One recorded dynamic instruction.
struct TraceRec {
  int32_t idx;        // instruction index (static info in Tracer::statics)
  uint32_t aux;       // LDS: conflict cycles; VMEM: first line in Tracer::lines
  uint32_t naux;      // VMEM: number of lines; DS: bytes moved
};

enum TPipe : uint8_t { TP_VALU, TP_TRANS, TP_MFMA, TP_SALU, TP_SMEM, TP_LDS, TP_VMEM, TP_BRANCH, TP_WAITCNT,
                       TP_BARRIER, TP_NOP, TP_SETPRIO, TP_END, TP_OTHER, TP_COUNT };

struct TraceStatic {
  bool known = false;
  uint8_t pipe = TP_OTHER;
  int cycles = 4;       // pipeline occupancy
  int latency = 4;      // until the written registers are readable
  uint16_t rd[8]; uint8_t nrd = 0;   // operand codes read (expanded ranges are [code, code + n))
  uint8_t rdn[8];
  uint16_t wr[3]; uint8_t nwr = 0;
  uint8_t wrn[3];
  int vm = 63, lgkm = 15;             // s_waitcnt
  int nop = 0, prio = 0;
  bool store = false, vmem_lds = false;
  // MFMA / VALU co-execution (issue slots after an MFMA issues, see docs/performance.md)
  int valu_hold = 0, pk_hold = 0;     // MFMA: slots before a VALU / a packed-f32 VALU or DOT may issue
  bool pk_f32 = false;                // VALU: v_pk_{add,fma,mul}_f32, v_pk_mov_b32 or a DOT
  std::string name;
  uint32_t pc = 0;                    // the instruction's byte offset in its kernel (per-instruction stalls)
};

struct TracedWave { std::vector<TraceRec> recs; };
struct TracedWorkgroup { uint32_t id[3]; std::vector<TracedWave> waves; };

class Tracer : public TraceSink {
 public:
  Tracer(const TimingConfig& cfg, bool gfx950, std::vector<std::array<uint32_t, 3>> wanted, bool run_untraced);
  bool begin_workgroup(const uint32_t wg[3], int nwaves) override;
  bool run_untraced() const override { return run_untraced_; }
  void on_inst(int wave, int idx, const Inst& in, const uint32_t* sgpr, const uint32_t* vrows, uint64_t exec) override;
  void end_workgroup() override;
  // The launch's buffers (storage base, bytes), in argument order: an address inside buffer i is traced at
  // canonical_address(i) + its offset, so the caches' set indices and the line boundaries do not depend on where
  // the host allocator put the buffer (before, the same launch's modeled cycles moved by up to 4 % with the
  // allocation history of the process). Addresses in no buffer are traced as they are.
  void set_buffers(std::vector<std::pair<uint64_t, uint64_t>> buffers);
  static uint64_t canonical_address(size_t i) { return (uint64_t)(i + 1) << 40; }  // 1 TiB apart, 1 TiB-aligned

  std::vector<TracedWorkgroup> wgs;
  std::vector<TraceStatic> statics;
  std::vector<uint64_t> lines;
  uint64_t lds_conflict_cycles = 0, lds_ideal_cycles = 0;
  uint64_t unmapped_accesses = 0;  // traced lane accesses in no launch buffer (traced at their host address)

 private:
  const TraceStatic& stat(int idx, const Inst& in);
  uint64_t traced_address(uint64_t a);
  std::vector<std::pair<uint64_t, uint64_t>> buffers_;  // (base, bytes), sorted by base
  std::vector<uint64_t> canon_;                          // their canonical bases
  size_t last_buffer_ = 0;
  TimingConfig cfg_;
  bool gfx950_, run_untraced_;
  std::vector<std::array<uint32_t, 3>> wanted_;
  TracedWorkgroup* cur_ = nullptr;
};

struct WaveStats {
  std::map<std::string, double> cycles;  // issue by pipe, stalls by cause
};

struct TimingReport {
  std::vector<uint64_t> cu_cycles;                 // per simulated CU: cycles until its last workgroup ended
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> wg_spans;  // per CU: (start, end) of each workgroup
  std::map<std::string, double> stall;             // summed over waves: cycles by cause
  std::map<std::string, double> pipe_busy;         // summed over SIMDs: busy cycles by pipe
  std::map<std::string, double> mem;               // cache / byte counters
  // per (wave index in its workgroup, instruction's byte offset in the kernel): cycles by cause while that
  // instruction was the wave's next (summed over workgroups; the issue window of its issue counts as "issued")
  std::map<std::pair<int, uint32_t>, std::map<std::string, double>> stall_by_pc;
  // dependency waits by (waiting instruction's offset, offset of the instruction that wrote the register it waited for)
  std::map<std::pair<uint32_t, uint32_t>, double> dep_by_pair;
  uint64_t instructions = 0;
};

// Replay the traced workgroups: cus[c] lists indices into tracer.wgs run on CU c in order, `slots`
// workgroups resident per CU at a time.
TimingReport simulate(const Tracer& tr, const TimingConfig& cfg, const std::vector<std::vector<int>>& cus, int slots);

}  // namespace mmemu
