#!/usr/bin/python3
"""gpt-nano against the same model written in plain PyTorch, with the same weights.

The PyTorch model below is GPT-2's layout at gpt-nano's size (4 layers, 128
wide, 4 heads, context 128) with a vocabulary of 64: pre-norm blocks, causal
attention with a fused QKV projection, tanh GELU, the head tied to the token
embedding. Random weights go to ringtrain through safetensors (`weights
import`, ringtrain's names); then
  eval   `ringtrain eval` on a token split (3 windows, the last one partial)
         gives PyTorch's per-token cross-entropy over every token: the loss is
         a function of every logit;
  step   one SGD step on every training window (`train --init-from`, lr 0.1,
         no momentum) gives PyTorch's parameters after its step (`weights
         export`): every gradient of backward at once, the tied one included;
  names  `weights export --names hf-gpt2` gives Hugging Face GPT-2's state dict
         layout, and `weights import` takes it back unchanged.

  /usr/bin/python3 tests/model/torch_reference_gpt.py RINGTRAIN_EXE
Exit 0 on a match, 1 on a mismatch, 77 where PyTorch, numpy or h5py is missing.
"""
import math
import os
import sys
import tempfile

try:
    import h5py
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:
    print("SKIPPED: %s (launch/install-deps.sh installs python3-torch and python3-h5py)" % e)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402  (safetensors and the CLI, shared with the other reference)
from safetensors_io import read_safetensors, write_safetensors  # noqa: E402

torch.set_num_threads(1)
EXE = sys.argv[1]
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OPENBLAS_NUM_THREADS="1")


def run(cmd):
    return safetensors_io.run(cmd, ENV)
LAYERS, WIDTH, HEADS, CONTEXT, VOCAB = 4, 128, 4, 128, 64
# Dropout off, explicitly: the comparison is of the deterministic model, and the
# PyTorch side has none (gpt-nano's default is 0 too; gpt2's is GPT-2's 0.1).
MODEL = "gpt-nano:dropout=0"


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = torch.nn.LayerNorm(WIDTH)
        self.attn = torch.nn.Module()
        self.attn.c_attn = torch.nn.Linear(WIDTH, 3 * WIDTH)
        self.attn.c_proj = torch.nn.Linear(WIDTH, WIDTH)
        self.ln_2 = torch.nn.LayerNorm(WIDTH)
        self.mlp = torch.nn.Module()
        self.mlp.c_fc = torch.nn.Linear(WIDTH, 4 * WIDTH)
        self.mlp.c_proj = torch.nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.attn.c_attn(self.ln_1(x)).split(WIDTH, dim=2)
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        s = (q @ k.transpose(-2, -1)) / math.sqrt(c // HEADS)
        p = s.masked_fill(~mask, float("-inf")).softmax(-1)
        o = (p @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.attn.c_proj(o)
        return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x)), approximate="tanh"))


class Gpt(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = torch.nn.Embedding(VOCAB, WIDTH)
        self.wpe = torch.nn.Embedding(CONTEXT, WIDTH)
        self.h = torch.nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = torch.nn.LayerNorm(WIDTH)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for block in self.h:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()  # the tied head





def windows(tokens, keep_partial):
    """ringtrain's windows: start k*CONTEXT, CONTEXT+1 tokens, targets -100 past the end."""
    n = len(tokens)
    count = (n - 1 + CONTEXT - 1) // CONTEXT if keep_partial else (n - 1) // CONTEXT
    xs, ys = [], []
    for k in range(count):
        w = tokens[k * CONTEXT:k * CONTEXT + CONTEXT + 1]
        have = len(w) - 1
        xs.append(list(w[:have]) + [0] * (CONTEXT - have))
        ys.append(list(w[1:]) + [-100] * (CONTEXT - have))
    return torch.tensor(xs), torch.tensor(ys)


def main():
    failures = []
    gen = torch.Generator().manual_seed(3)
    torch.manual_seed(4)
    model = Gpt()
    with torch.no_grad():  # GPT-2's scale, and LayerNorm affines away from 1 and 0
        for name, p in model.named_parameters():
            if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight":
                p.uniform_(0.7, 1.3, generator=gen)
            elif p.dim() == 1:
                p.uniform_(-0.05, 0.05, generator=gen)
            else:
                p.normal_(0.0, 0.05, generator=gen)
    train_tokens = torch.randint(0, VOCAB, (4 * CONTEXT + 1,), generator=gen).tolist()
    test_tokens = torch.randint(0, VOCAB, (300,), generator=gen).tolist()
    with tempfile.TemporaryDirectory() as work:
        data = os.path.join(work, "tokens.h5")
        with h5py.File(data, "w") as f:
            f.attrs["vocab_size"] = VOCAB
            f.attrs["tokenizer"] = "bytes"
            f.create_group("train").create_dataset("tokens", data=np.array(train_tokens, np.uint16))
            f.create_group("test").create_dataset("tokens", data=np.array(test_tokens, np.uint16))
        weights = os.path.join(work, "gpt.safetensors")
        write_safetensors(weights, model.state_dict())

        # eval: every test token, the partial window's padding ignored
        x, y = windows(test_tokens, True)
        with torch.no_grad():
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1), ignore_index=-100,
                                   reduction="sum").item() / (len(test_tokens) - 1)
        ck = os.path.join(work, "ck")
        run([EXE, "weights", "import", weights, "--model", MODEL, "--input", str(CONTEXT),
             "--classes", str(VOCAB), "-o", ck])
        out = run([EXE, "eval", "--device", "cpu", "--data", data, "--ckpt",
                   os.path.join(ck, "ckpt-0.h5")])
        line = [l for l in out.splitlines() if "loss=" in l][0]
        rt_loss = float(line.split("loss=")[1].split()[0])
        tokens = int(line.split("tokens=")[1].split()[0])
        print("eval: PyTorch %.6f per token, ringtrain %.6f over %d tokens" % (loss, rt_loss, tokens))
        if tokens != len(test_tokens) - 1 or abs(rt_loss - loss) > 2e-6 + 2e-6 * abs(loss):
            failures.append("eval differs")

        # one SGD step over the 4 training windows
        x, y = windows(train_tokens, False)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.0)
        opt.zero_grad()
        F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1)).backward()
        opt.step()
        run_dir = os.path.join(work, "step")
        run([EXE, "train", "--device", "cpu", "--data", data, "--model", MODEL, "--init-from",
             weights, "--batch", str(len(x)), "--max-steps", "1", "--lr", "0.1", "--momentum", "0",
             "--ckpt-dir", run_dir, "--log-every", "1", "--seed", "1"])
        exported = os.path.join(work, "step.safetensors")
        run([EXE, "weights", "export", "--ckpt", os.path.join(run_dir, "ckpt-1.h5"), "-o", exported])
        after = read_safetensors(exported)
        worst = 0.0
        for k, v in model.state_dict().items():
            if k not in after:
                failures.append("ringtrain lacks %s" % k)
                continue
            diff = (after[k] - v).abs().max().item()
            worst = max(worst, diff)
            if not bool(torch.all(torch.abs(after[k] - v) <= 2e-5 + 1e-4 * torch.abs(v))):
                failures.append("%s differs by up to %.3g" % (k, diff))
        extra = sorted(set(after) - set(model.state_dict()))
        if extra:
            failures.append("ringtrain has tensors PyTorch does not: %s" % extra)
        print("step: %d tensors compared, largest difference %.3g" % (len(after), worst))

        # Hugging Face GPT-2 names: export gives transformers' state dict
        # (Conv1D weights transposed, lm_head.weight the tied copy), and
        # import takes it back to the same checkpoint.
        def hf(name, t):
            conv1d = name.endswith(("c_attn.weight", "c_proj.weight", "c_fc.weight"))
            return "transformer." + name, (t.t() if conv1d else t)
        expected = dict(hf(k, v) for k, v in after.items())
        expected["lm_head.weight"] = after["wte.weight"]
        hf_file = os.path.join(work, "hf.safetensors")
        run([EXE, "weights", "export", "--ckpt", os.path.join(run_dir, "ckpt-1.h5"), "--names",
             "hf-gpt2", "-o", hf_file])
        got = read_safetensors(hf_file)
        if sorted(got) != sorted(expected):
            failures.append("hf-gpt2 names differ: %s" % sorted(set(got) ^ set(expected)))
        elif not all(torch.equal(got[k], expected[k]) for k in expected):
            failures.append("hf-gpt2 export differs in values or layout")
        back = os.path.join(work, "from-hf")
        run([EXE, "weights", "import", hf_file, "--model", MODEL, "--classes", str(VOCAB),
             "-o", back])
        again = os.path.join(work, "again.safetensors")
        run([EXE, "weights", "export", "--ckpt", os.path.join(back, "ckpt-0.h5"), "-o", again])
        again_t = read_safetensors(again)
        if sorted(again_t) != sorted(after) or not all(torch.equal(again_t[k], after[k]) for k in after):
            failures.append("hf-gpt2 import does not give the exported weights back")
        print("hf-gpt2: %d tensors exported with Hugging Face names and imported back" % len(got))
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print("PASS: gpt-nano matches PyTorch in evaluation (per-token loss) and one training step")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
