"""An example adapter for `python3 -m epsuite.check` (docs/plugins.md 15.5): expert-parallel dispatch and combine
written with torch.distributed.all_to_all_single, as a Python-first EP library might do it, over the gloo backend
on the CPU (a NCCL group and CUDA tensors work the same way).

    mpirun -np 4 python3 -m epsuite.check --backend epsuite.adapters.torch_alltoall:AllToAllAdapter

It declares ht-rank-major (trees ht-rank, ht-two-level) and ll (ll-weighted), bf16 and fp8, fixed receive
order and cached dispatch. A dispatch sends one record per (token, destination rank) for rank-major, one per valid
(token, slot) for ll: the token index, its routing (rank-major) or its local expert and weight (ll), the payload
row and its fp8 scales, as bytes, in one all_to_all_single after one of the byte counts. Combine sends the expert
outputs back the same way and reduces in fp32 in the order of docs/dispatch.md 5.5, one elementwise operation at
a time (each rounds once), with one bf16 rounding at the end.
"""
import math

import torch
import torch.distributed as dist


def _bytes(t):
    """A tensor's rows as raw bytes [rows, bytes] (also for zero rows)."""
    t = t.contiguous()
    return t.view(torch.uint8).reshape(t.shape[0], math.prod(t.shape[1:]) * t.element_size())


class _Plan:
    """What a dispatch keeps for combine and for a cached dispatch."""

    def __init__(self, layout, tokens, idx, weights, order, dest, send_counts, recv_counts):
        self.layout, self.tokens, self.idx, self.weights = layout, tokens, idx, weights
        self.order = order              # the records in send order: token (and slot) indices
        self.dest = dest                # each record's destination rank
        self.send_counts, self.recv_counts = send_counts, recv_counts  # records per peer
        self.recv_rows = None           # where each received record was placed


class AllToAllAdapter:
    name = "torch-alltoall"
    array_type = "torch"
    capabilities = {"layouts": ["ht-rank-major", "ll"], "trees": ["ht-rank", "ht-two-level", "ll-weighted"],
                    "dtypes": ["bf16", "fp8"], "open_order": [], "cached_dispatch": True}

    def __init__(self, config):
        self.rank, self.size = config["rank"], config["size"]
        self.experts, self.k, self.hidden = config["num_experts"], config["top_k"], config["hidden"]
        self.local = self.experts // self.size
        self.t_max = config["max_tokens_per_rank"]
        self.fp8 = config["dtype"] == "fp8"
        self.alignment = config["expert_alignment"]
        self.ranks_per_node = config["ranks_per_node"]
        self.group = config["group"]
        self.scales = self.hidden // 128 if self.fp8 else 0
        self.sent = self.received = 0

    # ---- moving bytes ------------------------------------------------------------------------------------------

    def _all_to_all(self, send, send_counts, recv_counts):
        """Rows of `send` [n, b] bytes, send_counts[q] of them to rank q; returns the received rows."""
        width = send.shape[1]
        recv = torch.empty((sum(recv_counts), width), dtype=torch.uint8)
        dist.all_to_all_single(recv.view(-1), send.reshape(-1), [c * width for c in recv_counts],
                               [c * width for c in send_counts], group=self.group)
        others = [q for q in range(self.size) if q != self.rank]
        self.sent += sum(send_counts[q] for q in others) * width
        self.received += sum(recv_counts[q] for q in others) * width
        return recv

    def _counts(self, dest):
        send = torch.bincount(dest, minlength=self.size).to(torch.int64)
        recv = torch.empty_like(send)
        dist.all_to_all_single(recv, send, group=self.group)
        return send.tolist(), recv.tolist()

    def wire_bytes(self):
        return self.sent, self.received

    # ---- dispatch ----------------------------------------------------------------------------------------------

    def _layout(self, idx):
        """docs/dispatch.md 5.1 of this rank's tokens."""
        tokens = idx.shape[0]
        valid = idx >= 0
        owner = torch.where(valid, torch.div(idx, self.local, rounding_mode="floor"), -1).long()
        in_rank = torch.zeros((tokens, self.size), dtype=torch.bool)
        for k in range(self.k):
            rows = torch.nonzero(valid[:, k]).flatten()
            in_rank[rows, owner[rows, k]] = True
        per_rank = in_rank.sum(0).to(torch.int32)
        every = [torch.empty_like(per_rank) for _ in range(self.size)]
        dist.all_gather(every, per_rank, group=self.group)
        return {"num_tokens_per_rank": per_rank,
                "num_tokens_per_expert": torch.bincount(idx[valid].long(), minlength=self.experts).to(torch.int32),
                "is_token_in_rank": in_rank,
                "rank_prefix_matrix": torch.cumsum(torch.stack(every), 0).to(torch.int32)}

    def _plan(self, layout, idx, weights):
        tokens = idx.shape[0]
        owner = torch.where(idx >= 0, torch.div(idx, self.local, rounding_mode="floor"), -1).long()
        if layout == "ht-rank-major":  # one record per (token, destination rank), ranks ascending, then tokens
            in_rank = torch.zeros((tokens, self.size), dtype=torch.bool)
            for k in range(self.k):
                rows = torch.nonzero(owner[:, k] >= 0).flatten()
                in_rank[rows, owner[rows, k]] = True
            dest, token = torch.nonzero(in_rank.t(), as_tuple=True)
            order = token
        else:  # one record per valid (token, slot), by destination, then token and slot
            token, slot = torch.nonzero(owner >= 0, as_tuple=True)
            by_dest = torch.sort(owner[token, slot], stable=True).indices
            token, slot, dest = token[by_dest], slot[by_dest], owner[token, slot][by_dest]
            order = torch.stack([token, slot], 1)
        send_counts, recv_counts = self._counts(dest)
        return _Plan(layout, tokens, idx.clone(), weights.clone(), order, dest, send_counts, recv_counts)

    def _records(self, plan, x, scales):
        """The send buffer: one row of bytes per record, in send order."""
        token = plan.order if plan.layout == "ht-rank-major" else plan.order[:, 0]
        parts = [_bytes(token.to(torch.int32).unsqueeze(1))]
        if plan.layout == "ht-rank-major":
            parts += [_bytes(plan.idx[token]), _bytes(plan.weights[token])]
        else:
            slot = plan.order[:, 1]
            local = torch.remainder(plan.idx[token, slot], self.local).to(torch.int32)
            parts += [_bytes(local.unsqueeze(1)), _bytes(plan.weights[token, slot].unsqueeze(1))]
        parts.append(_bytes(x[token]))
        if self.fp8:
            parts.append(_bytes(scales[token]))
        return torch.cat(parts, 1)

    def _place(self, plan, recv):
        """The outputs of the plan's layout from the received records (sources ascending, in send order)."""
        width = 2 * self.hidden if not self.fp8 else self.hidden
        header = 4 + 8 * self.k if plan.layout == "ht-rank-major" else 12
        token = recv[:, 0:4].contiguous().view(torch.int32).flatten()
        payload = recv[:, header:header + width].contiguous()
        scales = recv[:, header + width:].contiguous().view(torch.float32) if self.fp8 else None
        rows = payload.view(torch.bfloat16) if not self.fp8 else payload
        if plan.layout == "ht-rank-major":
            idx = recv[:, 4:4 + 4 * self.k].contiguous().view(torch.int32)
            weights = recv[:, 4 + 4 * self.k:header].contiguous().view(torch.float32)
            here = (idx >= 0) & (torch.div(idx, self.local, rounding_mode="floor") == self.rank)
            local = torch.where(here, torch.remainder(idx, self.local), -1).to(torch.int32)
            counts = torch.bincount(local[here].long(), minlength=self.local)
            counts = (counts + self.alignment - 1) // self.alignment * self.alignment
            plan.recv_rows = torch.arange(recv.shape[0])
            out = {"recv_x": rows, "recv_topk_idx": local,
                   "recv_topk_weights": torch.where(here, weights, torch.zeros_like(weights)),
                   "num_recv_tokens_per_expert": counts.to(torch.int32)}
            if self.fp8:
                out["recv_x_scales"] = scales
            return out
        local = recv[:, 4:8].contiguous().view(torch.int32).flatten().long()
        source = torch.repeat_interleave(torch.arange(self.size), torch.tensor(plan.recv_counts))
        capacity = self.size * self.t_max
        block = local * self.size + source  # (expert, source rank) blocks in ascending order of both
        counts = torch.bincount(block, minlength=self.local * self.size).reshape(self.local, self.size)
        begin = torch.cumsum(counts, 1) - counts
        by_block = torch.sort(block, stable=True).indices  # tokens stay ascending inside a block
        position = torch.empty_like(block)
        first_of_block = torch.cumsum(counts.flatten(), 0) - counts.flatten()
        position[by_block] = torch.arange(block.shape[0]) - first_of_block[block[by_block]]
        plan.recv_rows = local * capacity + begin.flatten()[block] + position
        packed = torch.zeros((self.local * capacity, rows.shape[1]), dtype=rows.dtype)
        packed[plan.recv_rows] = rows
        src_info = torch.full((self.local * capacity,), -1, dtype=torch.int32)
        src_info[plan.recv_rows] = token
        out = {"recv_x": packed.reshape(self.local, capacity, -1),
               "packed_recv_count": counts.sum(1).to(torch.int32),
               "src_info": src_info.reshape(self.local, capacity),
               "layout_range": torch.stack([begin, counts], 2).to(torch.int32)}
        if self.fp8:
            packed_scales = torch.zeros((self.local * capacity, self.scales), dtype=torch.float32)
            packed_scales[plan.recv_rows] = scales
            out["recv_x_scales"] = packed_scales.reshape(self.local, capacity, -1)
        return out

    def dispatch(self, layout, x, x_scales, topk_idx, topk_weights):
        plan = self._plan(layout, topk_idx, topk_weights)
        recv = self._all_to_all(self._records(plan, x, x_scales), plan.send_counts, plan.recv_counts)
        outputs = self._place(plan, recv)
        outputs.update(self._layout(topk_idx))
        return outputs, plan

    def dispatch_cached(self, plan, x, x_scales):
        recv = self._all_to_all(self._records(plan, x, x_scales), plan.send_counts, plan.recv_counts)
        return self._place(plan, recv)

    # ---- combine -----------------------------------------------------------------------------------------------

    def combine(self, plan, tree, x, bias0=None, bias1=None):
        rows = x.reshape(-1, self.hidden)[plan.recv_rows]  # each received record's output, in receive order
        back = self._all_to_all(_bytes(rows), plan.recv_counts, plan.send_counts)
        y = back.view(torch.bfloat16).float()  # the outputs of this rank's records, in send order
        acc = torch.zeros((plan.tokens, self.hidden), dtype=torch.float32)
        if tree == "ll-weighted":
            token, slot = plan.order[:, 0], plan.order[:, 1]
            for k in range(self.k):  # slots ascending; a token holds each slot once
                mine = torch.nonzero(slot == k).flatten()
                t = token[mine]
                acc[t] = acc[t] + plan.weights[t, k].unsqueeze(1) * y[mine]
        else:
            if bias0 is not None:
                acc = bias0.float()
            acc = acc + (bias1.float() if bias1 is not None else torch.zeros_like(acc))
            for first in range(0, self.size, self.ranks_per_node if tree == "ht-two-level" else 1):
                node = range(first, first + (self.ranks_per_node if tree == "ht-two-level" else 1))
                part = torch.zeros_like(acc) if tree == "ht-two-level" else acc
                reached = torch.zeros(plan.tokens, dtype=torch.bool)
                for q in node:  # destination ranks ascending
                    mine = torch.nonzero(plan.dest == q).flatten()
                    t = plan.order[mine]
                    part[t] = part[t] + y[mine]
                    reached[t] = True
                if tree == "ht-two-level":  # one bf16 rounding per node, for the tokens it holds
                    acc[reached] = acc[reached] + part[reached].to(torch.bfloat16).float()
        valid = plan.idx >= 0
        return acc.to(torch.bfloat16), torch.where(valid, plan.weights, torch.zeros_like(plan.weights))
