"""PyTorch's ProcessGroupNCCL on gnio through the NCCL drop-in, unchanged: every collective the
issue names checked element by element, send/recv, barrier, then 20 steps of DDP training whose
parameters must match the same 20 steps with the gloo backend on the same GPU tensors.

    LD_PRELOAD=build/nccl/libgnio_nccl.so torchrun --nproc-per-node 2 tests/nccl/torch_dropin_test.py

Ranks may share one GPU (NCCL itself refuses that; gnio does not). Exits non-zero on any
mismatch; prints one line per check on rank 0.
"""

import ctypes
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
local = int(os.environ.get("LOCAL_RANK", "0"))
device = torch.device("cuda", local % torch.cuda.device_count())
torch.cuda.set_device(device)


def say(text):
    if rank == 0:
        print(text, flush=True)


def check(name, got, want):
    got, want = got.cpu(), want.cpu()
    wrong = int((got != want).sum())
    if wrong:
        print(f"rank {rank}: {name}: {wrong} of {got.numel()} elements wrong "
              f"(first: got {got.flatten()[(got != want).flatten()][0].item()})", flush=True)
        sys.exit(1)
    say(f"ok  {name}")


def who_carries_nccl():
    """The file the process's ncclGetVersion resolves to (LD_PRELOAD puts the drop-in first)."""

    class DlInfo(ctypes.Structure):
        _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p),
                    ("sname", ctypes.c_char_p), ("saddr", ctypes.c_void_p)]

    address = ctypes.cast(ctypes.CDLL(None).ncclGetVersion, ctypes.c_void_p)
    found = DlInfo()
    ctypes.CDLL("libc.so.6").dladdr(address, ctypes.byref(found))
    return found.fname.decode()


carrier = who_carries_nccl()
say(f"ncclGetVersion comes from {carrier}")
if "gnio_nccl" not in carrier and os.environ.get("GNIO_DROPIN_EXPECT", "1") == "1":
    print(f"rank {rank}: NCCL symbols come from {carrier}, not libgnio_nccl (LD_PRELOAD?)")
    sys.exit(1)

dist.init_process_group("nccl", rank=rank, world_size=world, device_id=device)
n = 1031

# all_reduce: small integers, exact in float32.
x = (torch.arange(n, device=device, dtype=torch.float32) % 13) + rank
dist.all_reduce(x)
want = sum((torch.arange(n, dtype=torch.float32) % 13) + r for r in range(world))
check("all_reduce sum f32", x, want)
x = torch.full((n,), rank + 2, device=device, dtype=torch.int64)
dist.all_reduce(x, op=dist.ReduceOp.MAX)
check("all_reduce max i64", x, torch.full((n,), world + 1, dtype=torch.int64))

# all_gather_into_tensor / reduce_scatter_tensor.
mine = torch.arange(n, device=device, dtype=torch.bfloat16) % 100 + rank
out = torch.full((n * world,), -7, device=device, dtype=torch.bfloat16)
dist.all_gather_into_tensor(out, mine)
check("all_gather_into_tensor bf16", out,
      torch.cat([torch.arange(n, dtype=torch.bfloat16) % 100 + r for r in range(world)]))
big = (torch.arange(n * world, device=device, dtype=torch.float32) % 17) * (rank + 1)
part = torch.full((n,), -7.0, device=device)
dist.reduce_scatter_tensor(part, big)
full = sum((torch.arange(n * world, dtype=torch.float32) % 17) * (r + 1) for r in range(world))
check("reduce_scatter_tensor f32", part, full[rank * n:(rank + 1) * n])

# broadcast from the last rank.
b = torch.full((n,), float(rank), device=device) + torch.arange(n, device=device)
dist.broadcast(b, src=world - 1)
check("broadcast f32", b, torch.full((n,), float(world - 1)) + torch.arange(n))

# send/recv around a ring (grouped, as torch's batch_isend_irecv does).
right, left = (rank + 1) % world, (rank - 1) % world
s = torch.arange(4096, device=device, dtype=torch.int32) + 100000 * rank
r = torch.full((4096,), -1, device=device, dtype=torch.int32)
reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, s, right), dist.P2POp(dist.irecv, r, left)])
for q in reqs:
    q.wait()
check("batch_isend_irecv ring", r, torch.arange(4096, dtype=torch.int32) + 100000 * left)
if world >= 2:
    t = torch.full((777,), -1.0, device=device)
    if rank == 0:
        dist.send(torch.arange(777, device=device, dtype=torch.float32) * 3, dst=1)
    elif rank == 1:
        dist.recv(t, src=0)
        check("send/recv 0->1", t, torch.arange(777, dtype=torch.float32) * 3)
dist.barrier()
say("ok  barrier")


# DDP: 20 steps on the drop-in (nccl) and on gloo, same seeds, same data, same GPU tensors.
def train(group):
    torch.manual_seed(1234)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8)).to(device)
    ddp = nn.parallel.DistributedDataParallel(model, device_ids=[device.index],
                                              process_group=group)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(99 + rank)
    for _ in range(20):
        inp = torch.randn(16, 32, generator=data).to(device)
        target = torch.randn(16, 8, generator=data).to(device)
        opt.zero_grad()
        nn.functional.mse_loss(ddp(inp), target).backward()
        opt.step()
    torch.cuda.synchronize()
    return [p.detach().clone() for p in model.parameters()]


on_gnio = train(None)  # the default group: ProcessGroupNCCL, i.e. the drop-in
gloo = dist.new_group(backend="gloo")
on_gloo = train(gloo)
worst = 0.0  # per parameter tensor: max |difference| / max |gloo's value|
for a, b in zip(on_gnio, on_gloo):
    worst = max(worst, float((a - b).abs().max() / b.abs().max()))
say(f"DDP 20 steps, nccl (gnio) vs gloo: largest relative difference {worst:.3e}")
if worst > 1e-6:
    print(f"rank {rank}: DDP parameters differ from gloo's by {worst:.3e} (> 1e-6)")
    sys.exit(1)
say("ok  DDP matches gloo")
dist.destroy_process_group()
say("torch_dropin: all checks passed")
