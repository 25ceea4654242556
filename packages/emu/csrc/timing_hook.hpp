// moonmath-emu: the executor's timing-trace hook, the only coupling between exec.cpp and the
// trace-driven timing model (timing.hpp / timing.cpp, docs/performance.md).
//
// When LaunchParams::trace is set, the executor asks the sink before each workgroup whether to record
// it, and for a recorded workgroup calls on_inst() before every instruction a wave executes, with the
// wave's registers as they are before the instruction (so the sink can compute LDS and global
// addresses itself). The executor's results do not depend on the sink.
#pragma once
#include <cstdint>

#include "emu.hpp"

namespace mmemu {

struct TraceSink {
  virtual ~TraceSink() = default;
  // A workgroup is about to run: true = record its waves' instruction streams.
  virtual bool begin_workgroup(const uint32_t wg[3], int nwaves) = 0;
  // false: workgroups that are not recorded are not executed at all (their outputs stay unwritten).
  virtual bool run_untraced() const = 0;
  // Wave `wave` of the recorded workgroup is about to execute instruction `idx` (index into the
  // module's decoded stream). sgpr: its 128 SGPRs; vrows: its register file, row r (VGPR r, AGPR
  // 256 + r) at vrows + 64 * r; exec: its EXEC mask.
  virtual void on_inst(int wave, int idx, const Inst& in, const uint32_t* sgpr, const uint32_t* vrows, uint64_t exec) = 0;
  virtual void end_workgroup() = 0;
};

}  // namespace mmemu
