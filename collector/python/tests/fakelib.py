"""A stand-in for libppprof in unit tests: it records the calls."""


class FakeLib:
    def __init__(self, init_rc=1):
        self.calls = []
        self.init_rc = init_rc
        self.next_span = 1
        self.error = b""
        self.kinds = {}
        self.fail = {}  # function name -> return code to give

    def _rc(self, name, default):
        return self.fail.get(name, default)

    def ppprof_init(self, config):
        self.calls.append(("init", config.decode()))
        if self.init_rc < 0:
            self.error = b"bad config"
        return self.init_rc

    def ppprof_kind(self, name):
        self.calls.append(("kind", name.decode()))
        return self.kinds.setdefault(name.decode(), 100 + len(self.kinds))

    def _span(self, name):
        rc = self._rc(name, None)
        if rc is not None:
            self.error = b"refused"
            return rc
        s = self.next_span
        self.next_span += 1
        return s

    def ppprof_begin(self, h, kind, step, mb, chunk, stream):
        self.calls.append(("begin", kind, step, mb, chunk, stream))
        return self._span("ppprof_begin")

    def ppprof_end(self, h, span, stream, mem):
        self.calls.append(("end", span, stream, mem))
        return self._rc("ppprof_end", 0)

    def ppprof_p2p_issue(self, h, kind, peer, step, mb, chunk, nbytes, shape, dtype, stream):
        self.calls.append(("issue", kind, peer, step, mb, chunk, nbytes, shape, dtype, stream))
        return self._span("ppprof_p2p_issue")

    def ppprof_p2p_complete(self, h, span, stream):
        self.calls.append(("complete", span, stream))
        return 0

    def ppprof_opt_begin(self, h, step, stream):
        self.calls.append(("opt_begin", step))
        return self._span("ppprof_opt_begin")

    def ppprof_opt_end(self, h, span, skipped):
        self.calls.append(("opt_end", span, skipped))
        return 0

    def ppprof_step(self, h, step):
        self.calls.append(("step", step))
        return 0

    def ppprof_flush(self, h):
        self.calls.append(("flush",))
        return 0

    def ppprof_dump_pending(self, h):
        self.calls.append(("dump",))
        return 0

    def ppprof_set_time(self, h, ns):
        self.calls.append(("set_time", ns))
        return 0

    def ppprof_stats_get(self, h, out):
        out.recorded = 7
        return 0

    def ppprof_close(self, h):
        self.calls.append(("close",))
        return 0

    def ppprof_last_error(self):
        return self.error

    def names(self):
        return [c[0] for c in self.calls]


class FakeWork:
    def __init__(self):
        self.waited = 0

    def wait(self, timeout=None):
        self.waited += 1
        return True

    def is_completed(self):
        return self.waited > 0


class FakeTensor:
    def __init__(self, shape, dtype="torch.bfloat16", itemsize=2):
        self.shape = tuple(shape)
        self.dtype = dtype
        self._itemsize = itemsize

    def numel(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def element_size(self):
        return self._itemsize
