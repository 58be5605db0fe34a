"""A minimal PyTorch DistributedDataParallel (DDP) training loop for the Slurm examples.

Run it with torchrun (one process per GPU; torchrun sets RANK, LOCAL_RANK and
WORLD_SIZE), or with plain ``python`` for one process on one GPU or MIG
instance. The data are synthetic (a noisy linear function), so the example
needs nothing but PyTorch; put your dataset and model where the comments say.

    torchrun --standalone --nproc-per-node=2 train.py --epochs 2
    python train.py --lr 3e-4 --batch-size 64
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64, help="per process")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--workers", type=int, default=2, help="DataLoader worker processes per training process")
    parser.add_argument("--output-dir", type=Path, default=None, help="where rank 0 writes the checkpoint")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    distributed = "RANK" in os.environ  # set by torchrun
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    if distributed:
        # MASTER_ADDR/MASTER_PORT come from torchrun's rendezvous.
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    rank = dist.get_rank() if distributed else 0
    world_size = dist.get_world_size() if distributed else 1

    # Your dataset here. Every rank builds the same one (same seed); the
    # DistributedSampler gives each rank its own share of it.
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(8192, 32, generator=generator)
    targets = inputs @ torch.randn(32, 1, generator=generator) + 0.1 * torch.randn(8192, 1, generator=generator)
    dataset = TensorDataset(inputs, targets)
    sampler = DistributedSampler(dataset, shuffle=True) if distributed else None
    loader = DataLoader(
        dataset,
        batch_size=args.batch_size,
        sampler=sampler,
        shuffle=sampler is None,
        num_workers=args.workers,
        pin_memory=device.type == "cuda",
    )

    # Your model here.
    model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 1)).to(device)
    if distributed:
        model = DistributedDataParallel(model, device_ids=[local_rank] if device.type == "cuda" else None)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    loss_fn = nn.MSELoss()

    for epoch in range(args.epochs):
        if sampler is not None:
            sampler.set_epoch(epoch)  # a different shuffle each epoch, the same on every rank
        model.train()
        total = torch.zeros(2, device=device)  # sum of losses, number of samples
        for batch_inputs, batch_targets in loader:
            batch_inputs = batch_inputs.to(device, non_blocking=True)
            batch_targets = batch_targets.to(device, non_blocking=True)
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(batch_inputs), batch_targets)
            loss.backward()  # DDP averages the gradients across all ranks here
            optimizer.step()
            total[0] += loss.detach() * len(batch_inputs)
            total[1] += len(batch_inputs)
        if distributed:
            dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch}: loss {(total[0] / total[1]).item():.4f} ({world_size} processes)", flush=True)

    if rank == 0 and args.output_dir is not None:
        args.output_dir.mkdir(parents=True, exist_ok=True)
        state = model.module.state_dict() if distributed else model.state_dict()
        torch.save(state, args.output_dir / "model.pt")
        print(f"checkpoint: {args.output_dir / 'model.pt'}", flush=True)
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
