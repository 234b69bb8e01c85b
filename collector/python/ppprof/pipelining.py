"""Instrumenting torch.distributed.pipelining schedules (torch >= 2.4)."""

import warnings

from .recorder import B, F, RECV_B, RECV_F, SEND_B, SEND_F, W


def instrument_pipelining(schedule, recorder, first_step=0):
    """Record a torch.distributed.pipelining schedule's work with recorder:
    each stage's forward and backward chunks (F, B, and W for split
    backwards), and the P2P ops of each batch with their labels. The step
    counter starts at first_step and advances with each schedule.step().

    When torch.distributed.pipelining is not there (torch < 2.4; Debian's
    torch is 1.13), this warns once and returns the schedule untouched:
    record spans by hand with Recorder.forward/backward and isend/irecv.
    """
    try:
        from torch.distributed.pipelining import schedules  # noqa: F401
    except ImportError:
        try:
            import torch
            version = torch.__version__
        except ImportError:
            version = "not installed"
        warnings.warn(
            "ppprof: torch.distributed.pipelining is not available (torch %s; it needs >= 2.4): "
            "the schedule is not instrumented; record spans by hand "
            "(Recorder.forward/backward, Recorder.isend/irecv)" % version,
            RuntimeWarning, stacklevel=2)
        return schedule
    return _instrument(schedule, recorder, schedules, first_step)


class _State:
    """The step counter shared by the wrappers of one schedule."""

    def __init__(self, step):
        self.step = step


def _instrument(schedule, recorder, schedules_module, first_step=0):
    """The instrumentation itself, given the schedules module (a fake one
    in tests). Idempotent: a schedule is instrumented once."""
    if getattr(schedule, "_ppprof_instrumented", False):
        return schedule
    state = _State(first_step)
    stages = list(getattr(schedule, "_stages", None) or [schedule._stage])
    for chunk, stage in enumerate(stages):
        _wrap_stage(stage, recorder, state, chunk)
    _wrap_step(schedule, recorder, state)
    _wrap_batch_p2p(schedules_module, recorder, state)
    schedule._ppprof_instrumented = True
    return schedule


def _wrap_stage(stage, rec, state, chunk):
    fwd = stage.forward_one_chunk

    def forward_one_chunk(fwd_chunk_id, *args, **kwargs):
        with rec.forward(state.step, fwd_chunk_id, chunk):
            return fwd(fwd_chunk_id, *args, **kwargs)

    stage.forward_one_chunk = forward_one_chunk

    bwd = stage.backward_one_chunk

    def backward_one_chunk(bwd_chunk_id, *args, **kwargs):
        # full_backward=False computes input gradients only: W comes later.
        with rec.backward(state.step, bwd_chunk_id, chunk):
            return bwd(bwd_chunk_id, *args, **kwargs)

    stage.backward_one_chunk = backward_one_chunk

    bww = getattr(stage, "backward_weight_one_chunk", None)
    if bww is not None:
        def backward_weight_one_chunk(bwd_chunk_id, *args, **kwargs):
            with rec.wgrad(state.step, bwd_chunk_id, chunk):
                return bww(bwd_chunk_id, *args, **kwargs)

        stage.backward_weight_one_chunk = backward_weight_one_chunk

    # The P2P ops a stage hands the schedule carry their labels, so that
    # the batch that posts them can record them.
    for name, kind in (("get_fwd_send_ops", SEND_F), ("get_fwd_recv_ops", RECV_F),
                       ("get_bwd_send_ops", SEND_B), ("get_bwd_recv_ops", RECV_B)):
        orig = getattr(stage, name, None)
        if orig is not None:
            setattr(stage, name, _labelled(orig, kind, state, chunk))


def _labelled(get_ops, kind, state, chunk):
    def wrapper(chunk_id, *args, **kwargs):
        ops = get_ops(chunk_id, *args, **kwargs)
        for op in ops:
            try:
                op._ppprof = (kind, state.step, chunk_id, chunk)
            except AttributeError:
                pass
        return ops
    return wrapper


def _wrap_step(schedule, rec, state):
    step = schedule.step

    def wrapped(*args, **kwargs):
        rec.step(state.step)
        try:
            return step(*args, **kwargs)
        finally:
            state.step += 1

    schedule.step = wrapped


def _wrap_batch_p2p(mod, rec, state):
    """Wrap the schedules module's _batch_p2p (one work for a batch of ops)
    and _sorted_batch_p2p (a work per peer): the labelled ops of a batch are
    issued as it is posted and complete when its work's wait returns."""
    if getattr(mod, "_ppprof_wrapped", False):
        return
    mod._ppprof_wrapped = True
    recorders = mod._ppprof_recorders = [rec]

    def issue(ops):
        spans = []
        for op in ops:
            label = getattr(op, "_ppprof", None)
            if label is None:
                continue
            kind, step, mb, chunk = label
            tensor = getattr(op, "tensor", None)
            for r in recorders:
                if tensor is not None:
                    nbytes, shape, dtype = r._labels(tensor)
                else:
                    nbytes, shape, dtype = 0, None, None
                spans.append((r, r.issue(kind, op.peer, step, mb, chunk, nbytes, shape, dtype)))
        return spans

    orig = getattr(mod, "_batch_p2p", None)
    if orig is not None:
        def _batch_p2p(p2p_ops, *args, **kwargs):
            spans = issue(p2p_ops)
            return _track(orig(p2p_ops, *args, **kwargs), spans)
        mod._batch_p2p = _batch_p2p

    orig_sorted = getattr(mod, "_sorted_batch_p2p", None)
    if orig_sorted is not None:
        def _sorted_batch_p2p(p2p_ops, *args, **kwargs):
            by_peer = {}
            for op in p2p_ops:
                by_peer.setdefault(op.peer, []).append(op)
            spans = {peer: issue(ops) for peer, ops in by_peer.items()}
            works = orig_sorted(p2p_ops, *args, **kwargs)
            return {peer: _track(w, spans.get(peer, [])) for peer, w in works.items()}
        mod._sorted_batch_p2p = _sorted_batch_p2p


def _track(works, spans):
    """Wrap what a batch returned (one work, as in torch 2.4, or a list of
    works, as later) so that the batch's spans complete once every work of
    it has been waited."""
    if works is None or not spans:
        return works
    if isinstance(works, (list, tuple)):
        if not works:
            return works
        batch = _Batch(spans, len(works))
        return type(works)(_BatchWork(w, batch) for w in works)
    return _BatchWork(works, _Batch(spans, 1))


class _Batch:
    """The spans of one batch of P2P ops and how many works are unwaited."""

    __slots__ = ("spans", "left")

    def __init__(self, spans, works):
        self.spans, self.left = spans, works

    def waited(self):
        self.left -= 1
        if self.left == 0:
            spans, self.spans = self.spans, []
            for rec, span in spans:
                rec.complete(span)


class _BatchWork:
    """One work of a batch: its first wait() counts towards completing the
    batch's ops. Everything else is the wrapped work's."""

    __slots__ = ("_work", "_batch")

    def __init__(self, work, batch):
        self._work, self._batch = work, batch

    def wait(self, *args, **kwargs):
        out = self._work.wait(*args, **kwargs)
        batch, self._batch = self._batch, None
        if batch is not None:
            batch.waited()
        return out

    def __getattr__(self, name):
        return getattr(self._work, name)
