// ELF64 AMDGPU code object (v5) loader: symbols, kernel descriptors, msgpack metadata note.
#include <algorithm>
#include <memory>
#include <sstream>

#include "emu.hpp"

namespace mmemu {

namespace {

template <class T> T rd(const std::vector<uint8_t>& b, size_t off) {
  if (off + sizeof(T) > b.size()) throw EmuError("code object: truncated ELF (offset " + std::to_string(off) + ")");
  T v; std::memcpy(&v, b.data() + off, sizeof(T)); return v;
}

// ------------------------------------------------------------------ tiny msgpack reader
struct MP {
  enum T { NIL, BOOL, INT, UINT, FLOAT, STR, BIN, ARR, MAP } t = NIL;
  bool b = false; int64_t i = 0; uint64_t u = 0; double f = 0; std::string s;
  std::vector<MP> a; std::vector<std::pair<MP, MP>> m;
  const MP* get(const std::string& k) const {
    for (auto& kv : m) if (kv.first.t == STR && kv.first.s == k) return &kv.second;
    return nullptr;
  }
  int64_t num() const { return t == INT ? i : t == UINT ? (int64_t)u : t == FLOAT ? (int64_t)f : 0; }
};

struct MPReader {
  const uint8_t* p; size_t n, pos = 0;
  uint8_t u8() { if (pos >= n) throw EmuError("metadata: truncated msgpack"); return p[pos++]; }
  uint64_t be(int k) { uint64_t v = 0; for (int j = 0; j < k; j++) v = (v << 8) | u8(); return v; }
  std::string str(size_t k) {
    if (pos + k > n) throw EmuError("metadata: truncated msgpack string");
    std::string s((const char*)p + pos, k); pos += k; return s;
  }
  MP read(int depth = 0) {
    if (depth > 64) throw EmuError("metadata: msgpack nesting too deep");
    MP v; uint8_t c = u8();
    auto arr = [&](size_t k) { v.t = MP::ARR; for (size_t j = 0; j < k; j++) v.a.push_back(read(depth + 1)); };
    auto map = [&](size_t k) { v.t = MP::MAP; for (size_t j = 0; j < k; j++) { MP a = read(depth + 1); MP b = read(depth + 1); v.m.emplace_back(std::move(a), std::move(b)); } };
    if (c <= 0x7f) { v.t = MP::UINT; v.u = c; }
    else if (c >= 0xe0) { v.t = MP::INT; v.i = (int8_t)c; }
    else if ((c & 0xf0) == 0x80) map(c & 0xf);
    else if ((c & 0xf0) == 0x90) arr(c & 0xf);
    else if ((c & 0xe0) == 0xa0) { v.t = MP::STR; v.s = str(c & 0x1f); }
    else switch (c) {
      case 0xc0: v.t = MP::NIL; break;
      case 0xc2: v.t = MP::BOOL; v.b = false; break;
      case 0xc3: v.t = MP::BOOL; v.b = true; break;
      case 0xc4: v.t = MP::BIN; v.s = str(be(1)); break;
      case 0xc5: v.t = MP::BIN; v.s = str(be(2)); break;
      case 0xc6: v.t = MP::BIN; v.s = str(be(4)); break;
      case 0xca: { v.t = MP::FLOAT; uint32_t x = (uint32_t)be(4); float f; std::memcpy(&f, &x, 4); v.f = f; break; }
      case 0xcb: { v.t = MP::FLOAT; uint64_t x = be(8); std::memcpy(&v.f, &x, 8); break; }
      case 0xcc: v.t = MP::UINT; v.u = be(1); break;
      case 0xcd: v.t = MP::UINT; v.u = be(2); break;
      case 0xce: v.t = MP::UINT; v.u = be(4); break;
      case 0xcf: v.t = MP::UINT; v.u = be(8); break;
      case 0xd0: v.t = MP::INT; v.i = (int8_t)be(1); break;
      case 0xd1: v.t = MP::INT; v.i = (int16_t)be(2); break;
      case 0xd2: v.t = MP::INT; v.i = (int32_t)be(4); break;
      case 0xd3: v.t = MP::INT; v.i = (int64_t)be(8); break;
      case 0xd9: v.t = MP::STR; v.s = str(be(1)); break;
      case 0xda: v.t = MP::STR; v.s = str(be(2)); break;
      case 0xdb: v.t = MP::STR; v.s = str(be(4)); break;
      case 0xdc: arr(be(2)); break;
      case 0xdd: arr(be(4)); break;
      case 0xde: map(be(2)); break;
      case 0xdf: map(be(4)); break;
      default: throw EmuError("metadata: unsupported msgpack type byte " + std::to_string(c));
    }
    return v;
  }
};

struct Sec { std::string name; uint32_t type; uint64_t flags, addr, off, size, link, entsize; };

}  // namespace

CodeObject load_code_object(const uint8_t* data, size_t n) {
  CodeObject co;
  co.image.assign(data, data + n);
  auto& b = co.image;
  if (n < 64 || std::memcmp(b.data(), "\x7f" "ELF", 4) != 0) throw EmuError("code object: not an ELF file");
  if (b[4] != 2) throw EmuError("code object: not ELF64");
  uint16_t machine = rd<uint16_t>(b, 18);
  if (machine != 0xE0) throw EmuError("code object: e_machine is not EM_AMDGPU (0xE0)");
  uint32_t flags = rd<uint32_t>(b, 48);
  co.mach = flags & 0xff;
  if (co.mach == 0x4C) co.arch = "gfx942";
  else if (co.mach == 0x4F) { co.arch = "gfx950"; co.gfx950 = true; }
  else {
    std::ostringstream os; os << "code object: unsupported GPU (e_flags mach 0x" << std::hex << co.mach
                              << "); moonmath-emu runs gfx942 (0x4c) and gfx950 (0x4f)";
    throw EmuError(os.str());
  }
  uint64_t shoff = rd<uint64_t>(b, 40);
  uint16_t shentsize = rd<uint16_t>(b, 58), shnum = rd<uint16_t>(b, 60), shstrndx = rd<uint16_t>(b, 62);
  std::vector<Sec> secs(shnum);
  for (int i = 0; i < shnum; i++) {
    size_t o = shoff + (size_t)i * shentsize;
    secs[i].type = rd<uint32_t>(b, o + 4);
    secs[i].flags = rd<uint64_t>(b, o + 8);
    secs[i].addr = rd<uint64_t>(b, o + 16);
    secs[i].off = rd<uint64_t>(b, o + 24);
    secs[i].size = rd<uint64_t>(b, o + 32);
    secs[i].link = rd<uint32_t>(b, o + 40);
    secs[i].entsize = rd<uint64_t>(b, o + 56);
    uint32_t nm = rd<uint32_t>(b, o);
    secs[i].name = nm;  // placeholder, resolved below
    secs[i].name = std::to_string(nm);
  }
  if (shstrndx < shnum) {
    for (auto& s : secs) {
      size_t nm = std::stoul(s.name);
      size_t o = secs[shstrndx].off + nm;
      std::string r;
      while (o < n && b[o]) r += (char)b[o++];
      s.name = r;
    }
  }
  auto vaddr_to_off = [&](uint64_t va) -> uint64_t {
    for (auto& s : secs)
      if (s.type != 8 /*NOBITS*/ && s.addr && va >= s.addr && va < s.addr + s.size) return s.off + (va - s.addr);
    throw EmuError("code object: address not in any section");
  };
  // load segments
  {
    uint64_t phoff = rd<uint64_t>(b, 32);
    uint16_t phentsize = rd<uint16_t>(b, 54), phnum = rd<uint16_t>(b, 56);
    uint64_t top = 0;
    for (int i = 0; i < phnum; i++) {
      size_t o = phoff + (size_t)i * phentsize;
      if (rd<uint32_t>(b, o) != 1) continue;
      top = std::max<uint64_t>(top, rd<uint64_t>(b, o + 16) + rd<uint64_t>(b, o + 40));
    }
    if (top > (1ull << 30)) throw EmuError("code object: implausible load size");
    co.loaded.assign(top + 64, 0);
    for (int i = 0; i < phnum; i++) {
      size_t o = phoff + (size_t)i * phentsize;
      if (rd<uint32_t>(b, o) != 1) continue;
      uint64_t off = rd<uint64_t>(b, o + 8), va = rd<uint64_t>(b, o + 16), fsz = rd<uint64_t>(b, o + 32);
      if (off + fsz > n) throw EmuError("code object: segment outside file");
      std::memcpy(co.loaded.data() + va, b.data() + off, fsz);
    }
    for (auto& s : secs)
      if (s.type == 1 /*PROGBITS*/ && (s.flags & 4) /*SHF_EXECINSTR*/) co.text.emplace_back(s.addr, s.size);
  }
  // symbols
  struct Sym { std::string name; uint64_t value, size; int type; };
  std::vector<Sym> syms;
  for (auto& s : secs) {
    if (s.type != 2 /*SYMTAB*/ && s.type != 11 /*DYNSYM*/) continue;
    const Sec& str = secs.at(s.link);
    for (uint64_t o = s.off; o + 24 <= s.off + s.size; o += 24) {
      uint32_t nm = rd<uint32_t>(b, o);
      uint8_t info = b[o + 4];
      uint64_t val = rd<uint64_t>(b, o + 8), sz = rd<uint64_t>(b, o + 16);
      std::string name;
      for (size_t q = str.off + nm; q < n && b[q]; q++) name += (char)b[q];
      syms.push_back({name, val, sz, info & 0xf});
    }
  }
  // metadata
  MP md;
  bool have_md = false;
  for (auto& s : secs) {
    if (s.type != 7 /*NOTE*/) continue;
    size_t o = s.off, end = s.off + s.size;
    while (o + 12 <= end) {
      uint32_t namesz = rd<uint32_t>(b, o), descsz = rd<uint32_t>(b, o + 4), type = rd<uint32_t>(b, o + 8);
      std::string owner((const char*)b.data() + o + 12, namesz ? namesz - 1 : 0);
      size_t desc = o + 12 + ((namesz + 3) & ~3u);
      if (type == 32 && owner == "AMDGPU") {
        if (desc + descsz > n) throw EmuError("code object: truncated metadata note");
        MPReader r{b.data() + desc, descsz};
        md = r.read();
        have_md = true;
      }
      o = desc + ((descsz + 3) & ~3u);
    }
  }
  if (!have_md) throw EmuError("code object: no NT_AMDGPU_METADATA note (code object v5 expected)");
  const MP* mkernels = md.get("amdhsa.kernels");
  if (!mkernels) throw EmuError("code object: metadata has no amdhsa.kernels");
  for (auto& mk : mkernels->a) {
    KernelDesc k;
    const MP* nm = mk.get(".name");
    const MP* sym = mk.get(".symbol");
    if (!nm) continue;
    k.name = nm->s;
    std::string kdname = sym ? sym->s : k.name + ".kd";
    if (auto* v = mk.get(".vgpr_count")) k.md_vgpr = (int)v->num();
    if (auto* v = mk.get(".agpr_count")) k.md_agpr = (int)v->num();
    if (auto* v = mk.get(".sgpr_count")) k.md_sgpr = (int)v->num();
    if (auto* v = mk.get(".wavefront_size")) k.md_wavefront = (int)v->num();
    if (auto* v = mk.get(".kernarg_segment_size")) k.md_kernarg_size = (uint32_t)v->num();
    if (auto* v = mk.get(".kernarg_segment_align")) k.md_kernarg_align = (uint32_t)v->num();
    if (auto* args = mk.get(".args")) {
      for (auto& a : args->a) {
        KernelArg ka;
        if (auto* v = a.get(".name")) ka.name = v->s;
        if (auto* v = a.get(".offset")) ka.offset = (uint32_t)v->num();
        if (auto* v = a.get(".size")) ka.size = (uint32_t)v->num();
        if (auto* v = a.get(".value_kind")) ka.value_kind = v->s;
        k.args.push_back(ka);
      }
    }
    // kernel descriptor
    const Sym* kd = nullptr; const Sym* fn = nullptr;
    for (auto& s : syms) {
      if (s.name == kdname) kd = &s;
      if (s.name == k.name && s.type == 2 /*FUNC*/) fn = &s;
    }
    if (!kd) throw EmuError("code object: kernel descriptor symbol " + kdname + " not found");
    uint64_t kdo = vaddr_to_off(kd->value);
    k.group_segment_fixed_size = rd<uint32_t>(b, kdo + 0);
    k.private_segment_fixed_size = rd<uint32_t>(b, kdo + 4);
    k.kernarg_size = rd<uint32_t>(b, kdo + 8);
    k.kernel_code_entry_byte_offset = rd<int64_t>(b, kdo + 16);
    k.rsrc3 = rd<uint32_t>(b, kdo + 44);
    k.rsrc1 = rd<uint32_t>(b, kdo + 48);
    k.rsrc2 = rd<uint32_t>(b, kdo + 52);
    k.kernel_code_properties = rd<uint16_t>(b, kdo + 56);
    uint16_t preload = rd<uint16_t>(b, kdo + 58);
    k.kernarg_preload_length = preload & 0x7f;
    k.kernarg_preload_offset = preload >> 7;
    uint64_t entry_va = kd->value + k.kernel_code_entry_byte_offset;
    k.code_offset = vaddr_to_off(entry_va);
    k.entry_vaddr = entry_va;
    if (fn && fn->value == entry_va && fn->size) k.code_size = fn->size;
    else {
      for (auto& s : secs)
        if (entry_va >= s.addr && entry_va < s.addr + s.size) k.code_size = s.addr + s.size - entry_va;
    }
    // rsrc1 (GFX9 / GFX90A+)
    uint32_t r1 = k.rsrc1, r2 = k.rsrc2, r3 = k.rsrc3, kp = k.kernel_code_properties;
    k.vgpr_granules = r1 & 0x3f;
    k.sgpr_granules = (r1 >> 6) & 0xf;
    k.vgpr_count = (k.vgpr_granules + 1) * 8;  // gfx90a+: granule of 8 (unified arch+acc file)
    k.float_round_32 = (r1 >> 12) & 3; k.float_round_16_64 = (r1 >> 14) & 3;
    k.float_denorm_32 = (r1 >> 16) & 3; k.float_denorm_16_64 = (r1 >> 18) & 3;
    k.dx10_clamp = (r1 >> 21) & 1; k.ieee_mode = (r1 >> 23) & 1;
    // rsrc2
    k.enable_private_segment = r2 & 1;
    k.user_sgpr_count = (r2 >> 1) & 0x1f;
    k.wg_id_x = (r2 >> 7) & 1; k.wg_id_y = (r2 >> 8) & 1; k.wg_id_z = (r2 >> 9) & 1;
    k.wg_info = (r2 >> 10) & 1;
    k.vgpr_workitem_id = (r2 >> 11) & 3;
    k.granulated_lds = (r2 >> 15) & 0x1ff;
    // rsrc3 (gfx90a+)
    k.accum_offset = ((r3 & 0x3f) + 1) * 4;
    k.tg_split = (r3 >> 16) & 1;
    k.kp_private_segment_buffer = kp & 1; k.kp_dispatch_ptr = (kp >> 1) & 1; k.kp_queue_ptr = (kp >> 2) & 1;
    k.kp_kernarg_segment_ptr = (kp >> 3) & 1; k.kp_dispatch_id = (kp >> 4) & 1; k.kp_flat_scratch_init = (kp >> 5) & 1;
    k.kp_private_segment_size = (kp >> 6) & 1; k.kp_wavefront_size32 = (kp >> 10) & 1; k.kp_dynamic_stack = (kp >> 11) & 1;
    co.kernels.push_back(std::move(k));
  }
  return co;
}

}  // namespace mmemu
