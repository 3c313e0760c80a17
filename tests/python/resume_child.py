"""A training process for test_resume.py that dies without warning.

    python resume_child.py CASES.json INDEX SOCKET DIR

Restores case INDEX-1 from its saved state (if INDEX > 0), finishes that
epoch and one more, and writes what it saw; then starts case INDEX, takes k
batches, saves loader.state_dict() with torch.save and kills itself with
SIGKILL (no cleanup, as a preempted job)."""

import json
import os
import signal
import sys

import torch

import galley
from galley import transforms as T

cases = json.load(open(sys.argv[1]))
index, socket, out = int(sys.argv[2]), sys.argv[3], sys.argv[4]


def make(case):
    return galley.DataLoader(case["root"], batch_size=case["batch_size"],
                             shuffle=case["shuffle"], policy=case["policy"], seed=case["seed"],
                             rank=case["rank"], world_size=case["world_size"],
                             drop_last=case["drop_last"], transform=T.Resize([8, 8]),
                             socket=socket)


def epoch_ids(loader):
    return [ids.tolist() for _x, _y, ids in loader.iter_with_ids()]


if index > 0:
    case = cases[index - 1]
    loader = make(case)
    loader.load_state_dict(torch.load(os.path.join(out, f"state{index - 1}.pt")))
    rest = epoch_ids(loader)
    following = epoch_ids(loader)
    with open(os.path.join(out, f"second{index - 1}.json"), "w") as f:
        json.dump({"rest": rest, "following": following, "len": len(loader)}, f)
    loader.close()

if index < len(cases):
    case = cases[index]
    loader = make(case)
    full = [epoch_ids(loader) for _ in range(case["full_epochs"])]
    first = []
    for _x, _y, ids in loader.iter_with_ids():
        first.append(ids.tolist())
        if len(first) == case["k"]:
            torch.save(loader.state_dict(), os.path.join(out, f"state{index}.pt"))
            break
    with open(os.path.join(out, f"first{index}.json"), "w") as f:
        json.dump({"first": first, "full": full}, f)
    os.kill(os.getpid(), signal.SIGKILL)
