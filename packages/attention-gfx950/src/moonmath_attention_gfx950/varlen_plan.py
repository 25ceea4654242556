"""VarlenPlan: forward_varlen split into plan() (once per forward pass) and run(q, k, v) (per layer), planned on the
device when the cu_seqlens live there (issue 13). docs/ops/VarlenPlan.md states the rules."""
from __future__ import annotations

import torch

from moonmath_common import checks, get_backend
from moonmath_common.emu_device import device_resident

from . import attention as _att


class VarlenPlan:
    """forward_varlen split in two: ``plan()`` once per forward pass, ``run(q, k, v)`` per layer.

    Where it plans:
      * device cu_seqlens (on a GPU; on the emu backend an ``EmuDeviceTensor``) and no host copies: a planning
        kernel writes the work list and the merge list into the plan's device buffer; the host reads no device
        value, so plan and runs can be captured in one graph, and a replay (or a new ``plan()`` call with the same
        B, max_seqlen_q, total_q, max_seqlen_k and heads, which rewrites the same buffer) follows the current
        lengths. Device lengths cannot be checked: each sequence is clamped to [0, total] and to max_seqlen (rows
        past that are not written).
      * host cu_seqlens (CPU tensors) or ``host_cu_seqlens_q/_k``: checked and planned on the host.
    Both make the same plan (the planning kernel and the host planner share their rules: tiles, key ranges, the
    KV split over idle CUs), so they give bit-identical outputs for the same lengths, split or not.

    Lifetime: the plan owns its device buffer (header, work items, merge items, the planner's scratch). Keep the
    plan object alive while any run or captured graph using it may execute; a re-plan with the same
    (B, max_seqlen_q, total_q, max_seqlen_k, heads) reuses the buffer, any other re-plan allocates a new one
    (graphs captured before then must not be replayed). The device path reads cu_seqlens only in the planning
    kernel: changing them affects the next plan (or replay), not a run.
    """

    def __init__(self) -> None:
        self._args: dict | None = None
        self._host: tuple[list[int], list[int]] | None = None   # host-planned: the cu_seqlens values
        self._buf: torch.Tensor | None = None                    # device-planned: the plan buffer
        self._layout: dict | None = None                         # its capacities and offsets (serving.py)
        self._key: tuple | None = None
        self._staging: dict = {}                                 # header -> host source of its copy (device
                                                                 # plan) or device [header][work] (host plan)
        self._work: dict | None = None                           # host-planned: the work list (serving.py)

    def plan(self, cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int,
             total_q: int, total_k: int, *, heads: int, kv_heads: int, causal: bool = False,
             softmax_scale: float | None = None, host_cu_seqlens_q: torch.Tensor | None = None,
             host_cu_seqlens_k: torch.Tensor | None = None, softcap: float | None = 0.0,
             window_size: tuple[int, int] = (-1, -1)) -> VarlenPlan:
        """Plan the work of one forward pass (every layer of it); returns the plan itself.

        Args:
            cu_seqlens_q, cu_seqlens_k: int32 ``[B + 1]`` contiguous, both on one device: sequence b is q rows
                [cu_q[b], cu_q[b+1]) and k/v rows [cu_k[b], cu_k[b+1]). On the GPU (emu backend: an
                ``EmuDeviceTensor``) without host copies: planned on the device, never read by the host. On the
                CPU: checked as forward_varlen's and planned on the host.
            max_seqlen_q, max_seqlen_k: ints in [0, 2^31) that bound every sequence length (checked when the
                lengths are on the host; on the device lengths are clamped to them).
            total_q, total_k: ints in [0, 2^31): the token counts of the q/out and k/v tensors the runs take.
            heads: int in [1, 2^31), the q heads of every run.
            kv_heads: int in [1, 2^31) dividing heads, the k/v heads of every run.
            causal: bool; bottom-right aligned per sequence.
            softmax_scale: as forward (|softmax_scale| * log2(e) within fp32), or None for 1/sqrt(Dqk) of each
                run's q.
            host_cu_seqlens_q/_k: optional CPU int32 ``[B + 1]`` copies of the cu_seqlens, both or neither: the
                host plans from them (checked; no sync).
            softcap: logit soft-cap applied by every run, as forward (None or 0: off).
            window_size: sliding window (left, right) applied by every run, as forward.

        Returns:
            The plan (self); ``on_device`` says where it was planned.

        Raises:
            TypeError: a cu_seqlens not an int32 tensor; an int, flag or scale argument of the wrong type.
            ValueError: an int out of range, heads not a multiple of kv_heads, cu_seqlens shapes or devices,
                host copies not on the CPU or given alone, host-visible cu_seqlens values or lengths beyond
                max_seqlen, softcap, window_size; each message names the argument.
            NoKernelError: device cu_seqlens on a backend with no gfx950 planning kernel.
        """
        checks.integer("total_q", total_q, lo=0, hi=2**31 - 1)
        checks.integer("total_k", total_k, lo=0, hi=2**31 - 1)
        checks.integer("heads", heads, lo=1, hi=2**31 - 1)          # 32-bit in the plan and the planning kernel
        checks.integer("kv_heads", kv_heads, lo=1, hi=2**31 - 1)
        if heads % kv_heads:
            raise ValueError(f"heads must be a multiple of kv_heads; got heads={heads}, kv_heads={kv_heads}")
        checks.integer("max_seqlen_q", max_seqlen_q, lo=0, hi=2**31 - 1)
        checks.integer("max_seqlen_k", max_seqlen_k, lo=0, hi=2**31 - 1)
        checks.boolean("causal", causal)
        if softmax_scale is not None:
            _att._scale(softmax_scale, 128)
        cap = _att._softcap(softcap)
        window = _att._window(window_size, causal)
        _att._index_vector("cu_seqlens_q", cu_seqlens_q)
        _att._index_vector("cu_seqlens_k", cu_seqlens_k, cu_seqlens_q.numel())
        if cu_seqlens_q.numel() < 1:
            raise ValueError("cu_seqlens_q must have B + 1 >= 1 elements; got 0")
        checks.same_device(cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k)
        n = cu_seqlens_q.numel()
        for hname, host in (("host_cu_seqlens_q", host_cu_seqlens_q), ("host_cu_seqlens_k", host_cu_seqlens_k)):
            if host is not None:
                _att._index_vector(hname, host, n)
                if host.device.type != "cpu" or device_resident(host):
                    raise ValueError(f"{hname} must be a CPU tensor (the host copy of cu_seqlens_{hname[-1]}); got "
                                     f"{'a device-resident tensor' if host.device.type == 'cpu' else host.device}")
        if (host_cu_seqlens_q is None) != (host_cu_seqlens_k is None):
            raise ValueError("give both host_cu_seqlens_q and host_cu_seqlens_k, or neither")
        self._args = dict(cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q,
                          max_seqlen_k=max_seqlen_k, total_q=total_q, total_k=total_k, heads=heads,
                          kv_heads=kv_heads, causal=causal, softmax_scale=softmax_scale, softcap=cap,
                          window_size=window)
        on_device = host_cu_seqlens_q is None and (device_resident(cu_seqlens_q) or device_resident(cu_seqlens_k))
        if not on_device:
            hq = host_cu_seqlens_q if host_cu_seqlens_q is not None else cu_seqlens_q
            hk = host_cu_seqlens_k if host_cu_seqlens_k is not None else cu_seqlens_k
            sq = "host_cu_seqlens_q" if host_cu_seqlens_q is not None else "cu_seqlens_q"
            sk = "host_cu_seqlens_k" if host_cu_seqlens_k is not None else "cu_seqlens_k"
            self._host = (_att._cu_seqlens(sq, hq, total_q, "total_q", max_seqlen_q, "max_seqlen_q"),
                          _att._cu_seqlens(sk, hk, total_k, "total_k", max_seqlen_k, "max_seqlen_k"))
            from . import serving

            self._work = serving.host_plan_work(*self._host, heads, kv_heads, causal, window)   # once per pass
            self._staging = {}
            return self
        self._host = None
        if get_backend() == "reference":
            return self          # the reference runs forward_varlen (it reads the lengths on the host)
        from . import serving

        layout = serving.device_plan_layout(n - 1, max_seqlen_q, total_q, max_seqlen_k, heads)
        key = (n - 1, max_seqlen_q, total_q, max_seqlen_k, heads, tuple(layout["policy"].items()),
               cu_seqlens_q.device)
        if self._buf is None or self._key != key:
            self._buf = torch.zeros(layout["bytes"], dtype=torch.uint8, device=cu_seqlens_q.device)
            self._key, self._layout = key, layout
        serving.plan_on_device(self._buf, self._layout, cu_seqlens_q, cu_seqlens_k, total_q, total_k, max_seqlen_q,
                               max_seqlen_k, causal, window)
        return self

    @property
    def on_device(self) -> bool:
        """True when the work list was written on the device (no host read), False when planned on the host."""
        if self._args is None:
            raise RuntimeError("VarlenPlan.on_device read before plan()")
        return self._host is None

    def run(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, out: torch.Tensor | None = None,
            return_lse: bool = False, sinks: torch.Tensor | None = None, k_descale: torch.Tensor | None = None,
            v_descale: torch.Tensor | None = None):
        """Run one layer over the plan: forward_varlen of q, k, v with the planned lengths and options.

        Args:
            q: bf16 ``[total_q, heads, Dqk]`` as planned, any strides with a contiguous head dim (as forward_varlen).
            k: bf16 ``[total_k, kv_heads, Dqk]`` as planned (or fp8 float8_e4m3fn with v, as forward_varlen).
            v: bf16 ``[total_k, kv_heads, Dv]`` as planned (or fp8 with k); (Dqk, Dv) one of forward's HEAD_DIMS.
            out: optional bf16 ``[total_q, heads, Dv]`` on q's device, not overlapping itself. Rows outside every
                sequence are not written (of out and of the LSE).
            return_lse: bool; also return fp32 LSE ``[heads, total_q]`` (natural log).
            sinks: this layer's fp32 ``[heads]`` attention sinks (forward's sinks=), or None.
            k_descale: fp8 K/V only: this layer's descale of k (forward's k_descale=), or None.
            v_descale: fp8 K/V only: this layer's descale of v (forward's v_descale=), or None.

        A plan serves any number of runs (layers) with different tensors; a device-planned run reads no device
        value on the host (each run writes the plan's header, its strides and scale, by a host-to-device copy).

        Returns:
            out, or (out, lse).

        Raises:
            RuntimeError: run() before plan().
            TypeError: q, k, v, out or sinks not a tensor or of the wrong dtype; return_lse not a bool.
            ValueError: shapes other than planned, head dims, strides, alignment, out, sinks, or tensors on
                another device than the plan's cu_seqlens (device-planned); each message names the argument.
            NoKernelError: the backend has no gfx950 kernel.
        """
        if self._args is None:
            raise RuntimeError("VarlenPlan.run() called before plan()")
        a = self._args
        for name, t, total, h, tname, hname in (("q", q, a["total_q"], a["heads"], "total_q", "heads"),
                                               ("k", k, a["total_k"], a["kv_heads"], "total_k", "kv_heads"),
                                               ("v", v, a["total_k"], a["kv_heads"], "total_k", "kv_heads")):
            checks.tensor(name, t, ndim=3)
            if t.shape[0] != total or t.shape[1] != h:
                raise ValueError(f"{name} must be [{tname}={total}, {hname}={h}, D] as planned; got {list(t.shape)}")
        if get_backend() == "reference":
            hq = torch.tensor(self._host[0], dtype=torch.int32) if self._host is not None else None
            hk = torch.tensor(self._host[1], dtype=torch.int32) if self._host is not None else None
            return _att.forward_varlen(q, k, v, a["cu_seqlens_q"] if hq is None else hq,
                                       a["cu_seqlens_k"] if hk is None else hk, a["max_seqlen_q"], a["max_seqlen_k"],
                                       softmax_scale=a["softmax_scale"], causal=a["causal"], return_lse=return_lse,
                                       out=out, softcap=a["softcap"], window_size=a["window_size"], sinks=sinks,
                                       k_descale=k_descale, v_descale=v_descale)
        # the kernels over the plan: validate the tensors as forward_varlen does, without any value of the cu_seqlens
        _att._qkv_dtypes(q, k, v)
        checks.boolean("return_lse", return_lse)
        _att._out_type(out)
        dev = checks.same_device(q=q, k=k, v=v, out=out)
        if self._host is None and dev != self._buf.device:
            raise ValueError(f"q must be on the device the plan was made on ({self._buf.device}, that of "
                             f"cu_seqlens); got {dev}")
        _att._heads(q.shape[1], k.shape[1], v.shape[1])
        _att._head_dims(q.shape[2], k.shape[2], v.shape[2])
        for name, t in (("q", q), ("k", k), ("v", v)):
            _att._strides(name, t, 0)
        scale = _att._scale(a["softmax_scale"], q.shape[2])
        sk = _att._sinks(sinks, q.shape[1], dev)
        kd, vd = _att._descales(k, v, k_descale, v_descale, k.shape[1], (q.shape[2], v.shape[2]), dev)
        oshape = [q.shape[0], q.shape[1], v.shape[2]]
        if out is None:
            out = torch.empty(oshape, dtype=torch.bfloat16, device=q.device)
        else:
            _att._check_out(out, oshape, dev, 0)
        lse = torch.empty(q.shape[1], q.shape[0], dtype=torch.float32, device=q.device) if return_lse else None
        from . import serving

        if self._host is not None:      # planned on the host once (plan()); each run writes only its header
            serving.run_host_planned(self._work, self._staging, q, k, v, out, lse, a["causal"], scale,
                                     softcap=a["softcap"], window=a["window_size"], sinks=sk,
                                     descales=_att._pair(kd, vd))
        else:
            serving.run_device_planned(self._buf, self._layout, q, k, v, out, lse, a["causal"], scale, self._staging,
                                       softcap=a["softcap"], window=a["window_size"], sinks=sk,
                                       descales=_att._pair(kd, vd))
        return (out, lse) if return_lse else out
