"""Unit tests of the Python binding's logic, over a fake library."""

import os
import sys
import unittest
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ppprof  # noqa: E402
from ppprof import recorder as recmod  # noqa: E402
from fakelib import FakeLib, FakeTensor, FakeWork  # noqa: E402


def new(lib=None, **kw):
    lib = lib or FakeLib()
    kw.setdefault("clock", "host")
    r = ppprof.Recorder("/tmp/x", rank=2, lib=lib, **kw)
    return r, lib


class RecorderTest(unittest.TestCase):
    def tearDown(self):
        for r in list(recmod._live):
            r.close()

    def test_config(self):
        r, lib = new(stage=1, job="j", pp=4, microbatches=8, schedule="1f1b", watchdog_s=2.5, flush_s=0.2,
                     signals="usr1", compression="lz4", fsync=True)
        cfg = dict(kv.split("=", 1) for kv in lib.calls[0][1].split(";"))
        self.assertEqual(cfg["dir"], "/tmp/x")
        self.assertEqual(cfg["rank"], "2")
        self.assertEqual(cfg["stage"], "1")
        self.assertEqual(cfg["pp"], "4")
        self.assertEqual(cfg["watchdog_ms"], "2500")
        self.assertEqual(cfg["flush_ms"], "200")
        self.assertEqual(cfg["clock"], "host")
        self.assertEqual(cfg["signals"], "usr1")
        self.assertEqual(cfg["fsync"], "1")
        self.assertNotIn("tp", cfg)  # unset keys are not sent
        with self.assertRaises(ValueError):
            new(job="a;b")

    def test_stage_defaults_to_rank(self):
        r, lib = new()
        self.assertIn("stage=2", lib.calls[0][1])

    def test_spans(self):
        r, lib = new()
        with r.forward(3, 1):
            pass
        with r.backward(3, 1, chunk=1):
            pass
        with r.wgrad(3, 1):
            pass
        with r.span("DATA", 3):
            pass
        s = r.begin(ppprof.F, 4, 0)
        r.end(s, mem_bytes=123)
        self.assertEqual(lib.calls[1], ("begin", ppprof.F, 3, 1, 0, 0))
        self.assertEqual(lib.calls[2], ("end", 1, ppprof.SAME_STREAM, 0))
        self.assertEqual(lib.calls[3], ("begin", ppprof.B, 3, 1, 1, 0))
        self.assertEqual(lib.calls[5], ("begin", ppprof.W, 3, 1, 0, 0))
        self.assertEqual(lib.calls[7], ("kind", "DATA"))
        self.assertEqual(lib.calls[8], ("begin", 100, 3, -1, 0, 0))
        self.assertEqual(lib.calls[-1], ("end", 5, ppprof.SAME_STREAM, 123))
        with r.span("DATA", 4):
            pass
        self.assertEqual(lib.names().count("kind"), 1, "kind ids are cached")

    def test_span_ends_on_exception(self):
        r, lib = new()
        with self.assertRaises(KeyError):
            with r.forward(0, 0):
                raise KeyError("boom")
        self.assertEqual(lib.names()[-1], "end")

    def test_p2p(self):
        r, lib = new()
        t = FakeTensor((4, 16, 32))
        w = FakeWork()
        wrapped = r.wrap_work(w, ppprof.SEND_F, 3, step=1, mb=2, tensor=t)
        self.assertEqual(lib.calls[-1], ("issue", ppprof.SEND_F, 3, 1, 2, 0, 4 * 16 * 32 * 2, b"4x16x32", b"bf16", 0))
        wrapped.wait()
        wrapped.wait()  # a second wait completes nothing more
        self.assertEqual(lib.names().count("complete"), 1)
        self.assertEqual(w.waited, 2)
        self.assertTrue(wrapped.is_completed())  # delegated
        s = r.issue("RECV_B", 3, 1, 2, shape="8x8", dtype="fp32")
        self.assertEqual(lib.calls[-1][7:9], (b"8x8", b"fp32"))
        r.complete(s)
        r.complete(0)  # not recorded: nothing to complete
        self.assertEqual(lib.names().count("complete"), 2)

    def test_errors_warn_once_unless_strict(self):
        lib = FakeLib()
        lib.fail["ppprof_begin"] = -1
        r, _ = new(lib)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            for _ in range(3):
                with r.forward(0, 0):
                    pass
        self.assertEqual(len(w), 1)
        self.assertIn("refused", str(w[0].message))
        self.assertNotIn("end", lib.names(), "a failed begin is not ended")
        strict, _ = new(lib, strict=True)
        with self.assertRaises(ppprof.PPProfError):
            strict.begin(ppprof.F, 0, 0)

    def test_init_failure_disables(self):
        lib = FakeLib(init_rc=-1)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            r, _ = new(lib)
        self.assertFalse(r.enabled)
        self.assertIn("bad config", str(w[0].message))
        with r.forward(0, 0):
            pass
        r.complete(r.issue(ppprof.SEND_F, 1, 0, 0))
        r.step(1)
        with r.optimizer(1):
            pass
        r.flush()
        r.close()
        self.assertEqual(lib.names(), ["init"])
        with self.assertRaises(ppprof.PPProfError):
            new(FakeLib(init_rc=-1), strict=True)

    def test_missing_library(self):
        old = os.environ.pop("PPPROF_LIB", None)
        try:
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                r = ppprof.Recorder("/tmp/x", lib="/nonexistent/libppprof.so", clock="host")
            self.assertFalse(r.enabled)
            self.assertIn("cannot load libppprof", str(w[0].message))
        finally:
            if old is not None:
                os.environ["PPPROF_LIB"] = old

    def test_optimizer(self):
        r, lib = new()
        with r.optimizer(5) as o:
            o.skipped = True
        self.assertEqual(lib.calls[-2:], [("opt_begin", 5), ("opt_end", 1, 1)])

        class Scaler:
            def __init__(self, overflow):
                self.scale, self.overflow = 1024.0, overflow

            def get_scale(self):
                return self.scale

            def step(self, opt):
                if not self.overflow:
                    opt.step()

            def update(self):
                if self.overflow:
                    self.scale /= 2

        class Opt:
            steps = 0

            def step(self):
                Opt.steps += 1

        r.optimizer_step(Opt(), 6, scaler=Scaler(overflow=True))
        self.assertEqual(lib.calls[-1], ("opt_end", 2, 1))
        r.optimizer_step(Opt(), 7, scaler=Scaler(overflow=False))
        self.assertEqual(lib.calls[-1], ("opt_end", 3, 0))
        r.optimizer_step(Opt(), 8)
        self.assertEqual(lib.calls[-1], ("opt_end", 4, 0))
        self.assertEqual(Opt.steps, 2)

    def test_close_and_fork(self):
        r, lib = new()
        self.assertEqual(r.stats()["recorded"], 7)
        recmod._after_fork_in_child()  # as a forked child would run it
        self.assertFalse(r.enabled)
        with r.forward(0, 0):
            pass
        self.assertNotIn("begin", lib.names(), "a forked child must not call into the parent's Go runtime")
        r2, lib2 = new()
        with r2:
            pass
        self.assertEqual(lib2.names()[-1], "close")
        r2.close()
        self.assertEqual(lib2.names().count("close"), 1)
        self.assertEqual(r2.final_stats["recorded"], 7)


class PipeliningTest(unittest.TestCase):
    def test_without_the_module(self):
        try:
            import torch.distributed.pipelining  # noqa: F401
            self.skipTest("torch.distributed.pipelining is present")
        except ImportError:
            pass
        sched = object()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            self.assertIs(ppprof.instrument_pipelining(sched, None), sched)
        self.assertIn("torch.distributed.pipelining is not available", str(w[0].message))

    def test_instrument_logic(self):
        """_instrument over fakes shaped like torch 2.4's schedules module:
        a stage with forward/backward chunks and get_*_ops, and
        _batch_p2p posting a batch of P2POps as one work."""
        from ppprof.pipelining import _instrument
        import types

        class Op:
            def __init__(self, peer, tensor):
                self.peer, self.tensor = peer, tensor

        works = []

        def _batch_p2p(ops, desc=None):
            w = FakeWork()
            works.append(w)
            return w

        def _sorted_batch_p2p(ops, desc=None):
            return {op.peer: FakeWork() for op in ops}

        mod = types.SimpleNamespace(_batch_p2p=_batch_p2p, _sorted_batch_p2p=_sorted_batch_p2p)
        t = FakeTensor((2, 3), "torch.float32", 4)
        calls = []

        class Stage:
            def forward_one_chunk(self, mb, *args):
                calls.append(("fwd", mb))

            def backward_one_chunk(self, mb, loss=None, full_backward=True):
                calls.append(("bwd", mb))

            def backward_weight_one_chunk(self, mb):
                calls.append(("bww", mb))

            def get_fwd_recv_ops(self, mb):
                return [Op(0, t)]

            def get_fwd_send_ops(self, mb):
                return [Op(2, t)]

            def get_bwd_recv_ops(self, mb):
                return [Op(2, t)]

            def get_bwd_send_ops(self, mb):
                return [Op(0, t)]

        class Schedule:
            def __init__(self):
                self._stage = Stage()

            def step(self, *args):
                st = self._stage
                for mb in range(2):
                    mod._batch_p2p(st.get_fwd_recv_ops(mb)).wait()
                    st.forward_one_chunk(mb)
                    mod._batch_p2p(st.get_fwd_send_ops(mb)).wait()
                for mb in range(2):
                    for w in mod._sorted_batch_p2p(st.get_bwd_recv_ops(mb)).values():
                        w.wait()
                    st.backward_one_chunk(mb, full_backward=False)
                    st.backward_weight_one_chunk(mb)
                    mod._batch_p2p(st.get_bwd_send_ops(mb))  # never waited: stays pending
                return "loss"

        r, lib = new()
        sched = _instrument(Schedule(), r, mod, first_step=10)
        self.assertIs(_instrument(sched, r, mod), sched, "instrumenting twice is a no-op")
        self.assertEqual(sched.step(), "loss")
        sched.step()
        self.assertEqual(calls[:3], [("fwd", 0), ("fwd", 1), ("bwd", 0)])
        rec = [c for c in lib.calls if c[0] in ("begin", "issue", "step")]
        F, B, W = ppprof.F, ppprof.B, ppprof.W
        size = 2 * 3 * 4
        want_step = [
            ("step", 10),
            ("issue", ppprof.RECV_F, 0, 10, 0, 0, size, b"2x3", b"fp32", 0), ("begin", F, 10, 0, 0, 0),
            ("issue", ppprof.SEND_F, 2, 10, 0, 0, size, b"2x3", b"fp32", 0),
            ("issue", ppprof.RECV_F, 0, 10, 1, 0, size, b"2x3", b"fp32", 0), ("begin", F, 10, 1, 0, 0),
            ("issue", ppprof.SEND_F, 2, 10, 1, 0, size, b"2x3", b"fp32", 0),
            ("issue", ppprof.RECV_B, 2, 10, 0, 0, size, b"2x3", b"fp32", 0), ("begin", B, 10, 0, 0, 0),
            ("begin", W, 10, 0, 0, 0), ("issue", ppprof.SEND_B, 0, 10, 0, 0, size, b"2x3", b"fp32", 0),
            ("issue", ppprof.RECV_B, 2, 10, 1, 0, size, b"2x3", b"fp32", 0), ("begin", B, 10, 1, 0, 0),
            ("begin", W, 10, 1, 0, 0), ("issue", ppprof.SEND_B, 0, 10, 1, 0, size, b"2x3", b"fp32", 0),
        ]
        self.assertEqual(rec[:len(want_step)], want_step)
        self.assertEqual(rec[len(want_step)], ("step", 11), "the step counter advances")
        first = lib.calls[:lib.calls.index(("step", 11))]
        issued = sum(1 for c in first if c[0] == "issue")
        completed = sum(1 for c in first if c[0] == "complete")
        self.assertEqual((issued, completed), (8, 6), "the two unwaited sends stay pending")

    def test_batch_of_works(self):
        """Later torch returns a list of works from _batch_p2p and waits
        each (_wait_batch_p2p): the batch's ops complete after the last."""
        from ppprof.pipelining import _wrap_batch_p2p, _State
        import types

        class Op:
            def __init__(self, peer):
                self.peer, self.tensor = peer, None
                self._ppprof = (ppprof.SEND_F, 0, 0, 0)

        works = [FakeWork(), FakeWork()]
        mod = types.SimpleNamespace(_batch_p2p=lambda ops, desc=None: list(works))
        r, lib = new()
        _wrap_batch_p2p(mod, r, _State(0))
        got = mod._batch_p2p([Op(3), Op(3)])
        self.assertIsInstance(got, list)
        self.assertEqual(lib.names().count("issue"), 2)
        got[0].wait()
        self.assertEqual(lib.names().count("complete"), 0)
        for w in got:  # as torch's _wait_batch_p2p does
            w.wait()
        self.assertEqual(lib.names().count("complete"), 2)
        self.assertEqual([w.waited for w in works], [2, 1])


if __name__ == "__main__":
    unittest.main()
