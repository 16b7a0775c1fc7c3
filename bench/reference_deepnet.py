#!/usr/bin/python3
"""PyTorch-eager (Python) DeepNet training throughput: the reference for deepnet_bench_train.

For comparison only (docs/PERFORMANCE.md); no test, CI job or setup script uses it. It needs
Debian's python3-torch (1.13.1), which links the same OpenBLAS as our LibTorch build:

    apt-get install -y --no-install-recommends python3-torch
    OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/reference_deepnet.py --shape 6x6-d512 --threads 1

The model is written the way a PyTorch user would write it (nn.Linear, nn.LayerNorm,
F.dropout, F.log_softmax, torch.optim.AdamW) and matches model/ in meaning: Post-LN DeepNorm
encoder-decoder (x <- LN(alpha * x + G(x)), beta-scaled Xavier init of v/out/fc1/fc2), scaled
embeddings plus sinusoidal positions, one embedding table shared by source, target and output
projection, ReLU FFN, dropout 0.1 (attention and activation dropout 0), fairseq's label-smoothed
cross-entropy (epsilon 0.1) normalised by target tokens, gradient norm, AdamW (0.9, 0.98), 1e-8.
One step is 16 sentences x (32 source + 32 target) random tokens = 1,024 tokens.
"""

import argparse
import ctypes
import json
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, SRC_LEN, TGT_LEN = 16, 32, 32
TOKENS_PER_STEP = BATCH * (SRC_LEN + TGT_LEN)
PAD, BOS, FIRST_WORD = 0, 1, 4

SHAPES = {
    "6x6-d512": dict(layers=6, d=512, heads=8, ffn=2048),
    "100x100-d64": dict(layers=100, d=64, heads=2, ffn=128),
}
VOCAB = 8000
DROPOUT = 0.1
EPSILON = 0.1


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.q_proj = nn.Linear(d, d)
        self.k_proj = nn.Linear(d, d)
        self.v_proj = nn.Linear(d, d)
        self.out_proj = nn.Linear(d, d)

    def forward(self, query, memory, key_padding_mask, causal):
        b, t, d = query.shape
        s = memory.shape[1]
        h = self.heads
        q = (self.q_proj(query) * (d // h) ** -0.5).view(b, t, h, d // h).transpose(1, 2)
        k = self.k_proj(memory).view(b, s, h, d // h).transpose(1, 2)
        v = self.v_proj(memory).view(b, s, h, d // h).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1))
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask.view(b, 1, 1, s), float("-inf"))
        if causal:
            mask = torch.ones(t, s, dtype=torch.bool).triu_(1)
            scores = scores.masked_fill(mask, float("-inf"))
        probs = torch.softmax(scores, -1)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(b, t, d)
        return self.out_proj(out)


class Layer(nn.Module):
    def __init__(self, d, heads, ffn, alpha, cross):
        super().__init__()
        self.alpha = alpha
        self.self_attn = Attention(d, heads)
        self.self_attn_layer_norm = nn.LayerNorm(d)
        self.encoder_attn = Attention(d, heads) if cross else None
        self.encoder_attn_layer_norm = nn.LayerNorm(d) if cross else None
        self.fc1 = nn.Linear(d, ffn)
        self.fc2 = nn.Linear(ffn, d)
        self.final_layer_norm = nn.LayerNorm(d)

    def residual(self, x, branch, norm):
        return norm(x * self.alpha + F.dropout(branch, DROPOUT, self.training))

    def forward(self, x, mask, enc=None, enc_mask=None):
        causal = self.encoder_attn is not None
        x = self.residual(x, self.self_attn(x, x, mask, causal), self.self_attn_layer_norm)
        if self.encoder_attn is not None:
            x = self.residual(x, self.encoder_attn(x, enc, enc_mask, False),
                              self.encoder_attn_layer_norm)
        return self.residual(x, self.fc2(F.relu(self.fc1(x))), self.final_layer_norm)


class DeepNet(nn.Module):
    def __init__(self, layers, d, heads, ffn):
        super().__init__()
        n = m = layers
        enc_alpha = 0.81 * (n ** 4 * m) ** (1 / 16)
        enc_beta = 0.87 * (n ** 4 * m) ** (-1 / 16)
        dec_alpha = (3 * m) ** 0.25
        dec_beta = (12 * m) ** -0.25
        self.d = d
        self.embed_tokens = nn.Embedding(VOCAB, d, padding_idx=PAD)
        self.encoder = nn.ModuleList(Layer(d, heads, ffn, enc_alpha, False) for _ in range(n))
        self.decoder = nn.ModuleList(Layer(d, heads, ffn, dec_alpha, True) for _ in range(m))
        half = d // 2
        step = math.log(10000.0) / max(half - 1, 1)
        freq = torch.exp(torch.arange(half, dtype=torch.double) * -step)
        angles = torch.arange(1024, dtype=torch.double).unsqueeze(1) * freq.unsqueeze(0)
        self.register_buffer("positions", torch.cat([angles.sin(), angles.cos()], 1).float())
        with torch.no_grad():
            nn.init.normal_(self.embed_tokens.weight, 0.0, d ** -0.5)
            self.embed_tokens.weight[PAD].zero_()
            for stack, beta in ((self.encoder, enc_beta), (self.decoder, dec_beta)):
                for name, p in stack.named_parameters():
                    if name.endswith("bias"):
                        nn.init.zeros_(p)
                    elif "layer_norm" in name:
                        nn.init.ones_(p)
                    else:
                        gain = 1.0 if ("q_proj" in name or "k_proj" in name) else beta
                        nn.init.xavier_normal_(p, gain=gain)

    def embed(self, tokens):
        x = self.embed_tokens(tokens) * math.sqrt(self.d)
        x = x + self.positions[: tokens.shape[1]].unsqueeze(0)
        return F.dropout(x, DROPOUT, self.training)

    def forward(self, src, tgt_in):
        src_mask = src.eq(PAD)
        x = self.embed(src)
        for layer in self.encoder:
            x = layer(x, src_mask)
        y = self.embed(tgt_in)
        for layer in self.decoder:
            y = layer(y, None, x, src_mask)
        return torch.matmul(y, self.embed_tokens.weight.t())


def label_smoothed_loss(logits, target):
    lprobs = F.log_softmax(logits.reshape(-1, logits.shape[-1]), -1)
    target = target.reshape(-1, 1)
    keep = target.ne(PAD)
    nll = -lprobs.gather(1, target).masked_fill(~keep, 0.0).sum()
    smooth = -lprobs.sum(-1, keepdim=True).masked_fill(~keep, 0.0).sum()
    eps_i = EPSILON / (logits.shape[-1] - 1)
    return nll * (1.0 - EPSILON - eps_i) + smooth * eps_i, int(keep.sum())


def matmul_gflops(m, k, n, seconds):
    """(GFLOP/s per wall second, GFLOP/s per second of process CPU time) of torch.mm."""
    a, b = torch.randn(m, k), torch.randn(k, n)
    c = torch.empty(m, n)
    for _ in range(3):
        torch.mm(a, b, out=c)
    iterations, start, cpu_start = 0, time.perf_counter(), time.process_time()
    while True:
        for _ in range(4):
            torch.mm(a, b, out=c)
        iterations += 4
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            gflop = 2.0 * m * k * n * iterations / 1e9
            return gflop / elapsed, gflop / (time.process_time() - cpu_start)


def openblas_corename():
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_corename.restype = ctypes.c_char_p
        return lib.openblas_get_corename().decode()
    except (OSError, AttributeError):
        return "unknown"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="6x6-d512")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup-steps", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--matmul-seconds", type=float, default=0.5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(42)
    model = DeepNet(**SHAPES[args.shape])
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4, betas=(0.9, 0.98), eps=1e-8,
                                  weight_decay=0.0)
    gen = torch.Generator().manual_seed(1234)
    src = torch.randint(FIRST_WORD, VOCAB, (BATCH, SRC_LEN), generator=gen)
    tgt_out = torch.randint(FIRST_WORD, VOCAB, (BATCH, TGT_LEN), generator=gen)
    tgt_in = torch.cat([torch.full((BATCH, 1), BOS), tgt_out[:, :-1]], 1)
    params = list(model.parameters())

    def step():
        optimizer.zero_grad(set_to_none=False)
        loss, tokens = label_smoothed_loss(model(src, tgt_in), tgt_out)
        (loss / tokens).backward()
        torch.nn.utils.clip_grad_norm_(params, float("inf"))  # Norm only, as fairseq and ours.
        optimizer.step()
        return loss.item() / tokens

    for _ in range(args.warmup_steps):
        step()
    runs = []
    for _ in range(args.runs):
        start, cpu_start = time.perf_counter(), time.process_time()
        for _ in range(args.steps):
            loss = step()
        elapsed = time.perf_counter() - start
        cpu = time.process_time() - cpu_start
        mm, mm_cpu = matmul_gflops(BATCH * SRC_LEN, 512, 2048, args.matmul_seconds)
        runs.append(dict(step_s=elapsed / args.steps,
                         tokens_per_s=args.steps * TOKENS_PER_STEP / elapsed,
                         target_tokens_per_s=args.steps * BATCH * TGT_LEN / elapsed,
                         matmul_gflops=mm, cpu_s_per_wall_s=cpu / elapsed,
                         tokens_per_cpu_s=args.steps * TOKENS_PER_STEP / cpu,
                         matmul_gflops_per_cpu_s=mm_cpu, loss=loss))
        if not args.json:
            print("run: %.3f s/step  %.0f tok/s  matmul %.1f GFLOP/s  cpu/wall %.2f  "
                  "%.0f tok per CPU s  loss %.3f" %
                  (runs[-1]["step_s"], runs[-1]["tokens_per_s"], mm, cpu / elapsed,
                   runs[-1]["tokens_per_cpu_s"], loss), flush=True)
    median = {key: statistics.median(r[key] for r in runs)
              for key in ("step_s", "tokens_per_s", "target_tokens_per_s", "matmul_gflops",
                          "cpu_s_per_wall_s", "tokens_per_cpu_s", "matmul_gflops_per_cpu_s")}
    result = dict(shape=args.shape, implementation="pytorch-eager", torch=torch.__version__,
                  threads=torch.get_num_threads(), openblas_corename=openblas_corename(),
                  parameters=sum(p.numel() for p in params), steps=args.steps, runs=args.runs,
                  median=median, per_run=runs)
    if args.json:
        print(json.dumps(result))
    else:
        print("%s pytorch-eager, %d threads, OpenBLAS core %s: median %.0f tokens/s "
              "(%.3f s/step), matmul 512x512x2048 %.1f GFLOP/s; per CPU second (cpu/wall %.2f): "
              "%.0f tokens/s, matmul %.1f GFLOP/s" %
              (args.shape, result["threads"], result["openblas_corename"],
               median["tokens_per_s"], median["step_s"], median["matmul_gflops"],
               median["cpu_s_per_wall_s"], median["tokens_per_cpu_s"],
               median["matmul_gflops_per_cpu_s"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
