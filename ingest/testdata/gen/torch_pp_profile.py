#!/usr/bin/env python3
"""Writes a small real torch.profiler (Kineto) trace of a 2-stage pipeline:
two CPU processes (gloo), GPipe over 4 micro-batches, 2 steps, each action
labelled as torch.distributed.pipelining labels it (record_function
"PP:{stage}{action}{mb}": PP:0F3, PP:1RECV_F0, PP:0SEND_F1...), one trace per
rank, gzipped, into ingest/testdata/torchprof/.

Run from the repository root with Debian's python3-torch:
    /usr/bin/python3 ingest/testdata/gen/torch_pp_profile.py
"""
import gzip, os, shutil, sys, tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.profiler import profile, record_function, ProfilerActivity

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "torchprof")
MB, STEPS, HID, BATCH = 4, 2, 64, 8


def run(rank, world, initfile):
    torch.manual_seed(rank)
    dist.init_process_group("gloo", init_method="file://" + initfile, rank=rank, world_size=world)
    stage = torch.nn.Sequential(torch.nn.Linear(HID, HID), torch.nn.ReLU(), torch.nn.Linear(HID, HID))
    opt = torch.optim.SGD(stage.parameters(), lr=0.01)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for step in range(STEPS):
          with record_function(f"ProfilerStep#{step}"):
            opt.zero_grad()
            outs, ins = [], []
            for mb in range(MB):  # forward of every micro-batch (GPipe)
                if rank == 0:
                    x = torch.randn(BATCH, HID)
                    with record_function(f"PP:0F{mb}"):
                        y = stage(x)
                    with record_function(f"PP:0SEND_F{mb}"):
                        dist.send(y.detach(), dst=1)
                    outs.append(y)
                else:
                    x = torch.empty(BATCH, HID)
                    with record_function(f"PP:1RECV_F{mb}"):
                        dist.recv(x, src=0)
                    x.requires_grad_()
                    with record_function(f"PP:1F{mb}"):
                        y = stage(x)
                    ins.append(x)
                    outs.append(y)
            for mb in range(MB):  # backward, same order
                if rank == 1:
                    with record_function(f"PP:1B{mb}"):
                        outs[mb].pow(2).mean().backward()
                    with record_function(f"PP:1SEND_B{mb}"):
                        dist.send(ins[mb].grad, dst=0)
                else:
                    g = torch.empty(BATCH, HID)
                    with record_function(f"PP:0RECV_B{mb}"):
                        dist.recv(g, src=1)
                    with record_function(f"PP:0B{mb}"):
                        outs[mb].backward(g)
            with record_function("Optimizer.step#SGD.step"):
                opt.step()
    path = os.path.join(OUT, f"rank{rank}.pt.trace.json")
    prof.export_chrome_trace(path)
    with open(path, "rb") as f, gzip.open(path + ".gz", "wb", compresslevel=9) as g:
        shutil.copyfileobj(f, g)
    os.remove(path)
    dist.destroy_process_group()


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    initfile = os.path.join(tempfile.mkdtemp(), "init")
    mp.spawn(run, args=(2, initfile), nprocs=2, join=True)
    print("wrote", sorted(os.listdir(OUT)))
