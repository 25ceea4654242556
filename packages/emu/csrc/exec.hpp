// moonmath-emu executor interface.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "emu.hpp"
#include "timing_hook.hpp"

namespace mmemu {

struct Region {
  uint64_t base = 0, size = 0;
  std::string name;  // e.g. "arg 0 (a)"
  bool writable = true;
};

struct LaunchArg {
  enum Kind { PTR, INT, FLOAT, BYTES } kind = INT;
  uint64_t u = 0;      // pointer value or integer bits
  double f = 0;
  bool has_region = false;
  uint64_t rbase = 0, rsize = 0;  // storage extent for the sanitizer
  // BYTES: a by-value struct argument's bytes, laid out by the caller, and the storage extents of the
  // buffers its pointer fields address (for the sanitizer)
  std::string bytes;
  std::vector<std::pair<uint64_t, uint64_t>> regions;
};

struct Counters {
  uint64_t wave_instructions = 0, valu = 0, trans = 0, salu = 0, smem = 0, vmem = 0, ds = 0, waitcnt = 0,
           barrier = 0, mfma = 0, branch = 0, waves = 0, workgroups = 0;
  std::map<std::string, uint64_t> mfma_by_opcode;
  std::vector<std::string> hazards;  // report-only mode: one message per distinct site
  // lane checker (check_lanes): one message per distinct site in report-only mode; MFMAs executed while
  // EXEC was not all 64 lanes (an MFMA reads every lane whatever EXEC is)
  std::vector<std::string> lanes;
  uint64_t mfma_partial_exec = 0;
  // bytes requested per lane access: VMEM loads (incl. direct-to-LDS) / stores (incl. atomics), scalar
  // loads, LDS reads / writes by DS instructions; distinct 64-byte global lines touched by VMEM
  uint64_t vmem_load_bytes = 0, vmem_store_bytes = 0, smem_bytes = 0, lds_read_bytes = 0, lds_write_bytes = 0,
           global_lines = 0;
  // executions per instruction (summed over waves), by pc as disassemble() gives it: the launch's hot spots
  std::map<uint64_t, uint64_t> pc_counts;
};

struct LaunchParams {
  uint32_t grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  uint32_t dynamic_lds = 0;
  bool check_hazards = true;
  bool hazards_warn = false;  // with check_hazards: report each distinct site once and go on
  bool check_lanes = false;  // lane checker: stores of lanes whose values are undefined on hardware
  bool lanes_warn = false;   // with check_lanes: report each distinct site once and go on
  unsigned threads = 0;       // workgroups in parallel on this many threads; 0: MOONMATH_EMU_THREADS or all cores
  std::vector<LaunchArg> args;
  TraceSink* trace = nullptr;  // timing hook (timing_hook.hpp): records chosen workgroups
};

// A loaded, pre-decoded code object.
class Module {
 public:
  explicit Module(const uint8_t* data, size_t n);
  ~Module();
  const CodeObject& co() const { return co_; }
  Counters launch(const std::string& kernel, const LaunchParams& p);
  // (kernel, pc (vaddr), text) for every instruction of every kernel
  std::vector<std::tuple<std::string, uint64_t, std::string>> disassemble() const;
  std::vector<std::string> opcodes() const;
  struct Impl;

 private:
  CodeObject co_;
  std::unique_ptr<Impl> impl_;
};

std::vector<std::string> supported_opcodes(bool gfx950);

}  // namespace mmemu
