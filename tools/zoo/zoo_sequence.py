"""The zoo's sequence models: a BERT-style encoder, GPT-style decoders (with and without a
past), recurrent networks and an audio CNN (export_zoo.py's docstring lists them)."""

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from zoo_common import (MARGIN, audio_clips, batch_1_and_8, calibrate_bn, check_finite,
                        check_logits, classifier_batches, margins, redraw_zero_weights, require,
                        seed_of, smooth_features, spec)

# ---- text encoder (BERT style) ---------------------------------------------------------------


class BertEncoder(nn.Module):
    def __init__(self, vocab=30522, d=256, heads=4, layers=4, ff=1024, max_pos=512, types=2):
        super().__init__()
        self.heads = heads
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_pos, d)
        self.typ = nn.Embedding(types, d)
        self.norm = nn.LayerNorm(d, eps=1e-12)
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, activation="gelu", batch_first=True,
                                           layer_norm_eps=1e-12)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.pool = nn.Linear(d, d)
        with torch.no_grad():
            for emb in (self.tok, self.pos, self.typ):
                emb.weight.normal_(0, 0.5)

    def forward(self, input_ids, token_type_ids, attention_mask):
        n, s = input_ids.shape[0], input_ids.shape[1]
        pos = torch.arange(s, device=input_ids.device).unsqueeze(0)
        x = self.norm(self.tok(input_ids) + self.pos(pos) + self.typ(token_type_ids))
        # 0 / 1 mask -> additive mask [N * heads, S, S] (as src_mask, which also keeps
        # nn.TransformerEncoderLayer off its fused fast path).
        add = (1.0 - attention_mask.to(x.dtype)) * -10000.0
        add = add[:, None, None, :].expand(n, self.heads, s, s).reshape(n * self.heads, s, s)
        h = self.encoder(x, mask=add)
        return h, torch.tanh(self.pool(h[:, 0]))


def bert_inputs(name, vocab=30522, seq=128):
    def inputs(model):
        rng = np.random.default_rng(seed_of(name, "inputs"))
        res = {}
        for n in (1, 8):
            ids = rng.integers(1000, vocab, size=(n, seq))
            ids[:, 0] = 101  # [CLS]
            types = np.zeros((n, seq), np.int64)
            mask = np.ones((n, seq), np.int64)
            for i in range(n):
                length = seq if (n == 1 or i == 0) else int(rng.integers(seq // 4, seq))
                split = int(rng.integers(2, length))
                ids[i, length - 1] = 102  # [SEP]
                types[i, split:length] = 1
                ids[i, length:] = 0  # [PAD]
                mask[i, length:] = 0
            res[n] = [ids.astype(np.int64), types, mask]
        return res
    return inputs


def verify_bert(model, inputs, outs):
    check_finite("bert", outs)
    h = outs[0]
    require(h.std() > 0.1, "bert: hidden states have no spread")
    # Padded positions must not influence the others: change the padded ids, compare.
    ids, types, mask = inputs
    if mask.min() == 0:
        ids2 = np.where(mask == 0, 7, ids)
        with torch.no_grad():
            h2 = model(*[torch.from_numpy(a) for a in (ids2, types, mask)])[0].numpy()
        keep = mask.astype(bool)
        require(np.abs(h2[keep] - h[keep]).max() < 1e-4, "bert: padding leaks into unmasked positions")


def build_bert():
    model = BertEncoder()
    redraw_zero_weights(model)
    return model.eval()


seq_axes = {0: "batch", 1: "sequence"}
spec("bert_encoder", "text_encoder", build_bert, bert_inputs("bert_encoder"),
     ["input_ids", "token_type_ids", "attention_mask"], ["last_hidden_state", "pooler_output"],
     {"input_ids": seq_axes, "token_type_ids": seq_axes, "attention_mask": seq_axes,
      "last_hidden_state": seq_axes, "pooler_output": {0: "batch"}}, verify=verify_bert)


# ---- decoders (GPT style) ----------------------------------------------------------------------


class GptBlock(nn.Module):
    def __init__(self, d, heads, ff):
        super().__init__()
        self.heads, self.dh = heads, d // heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, ff)
        self.fc2 = nn.Linear(ff, d)

    def split(self, t):
        return t.reshape(t.shape[0], t.shape[1], self.heads, self.dh).transpose(1, 2)

    def forward(self, x, bias, past_k=None, past_v=None):
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        q, k, v = self.split(q), self.split(k), self.split(v)
        if past_k is not None:
            k = torch.cat([past_k, k], dim=2)
            v = torch.cat([past_v, v], dim=2)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.dh) + bias, dim=-1)
        y = (att @ v).transpose(1, 2)
        y = y.reshape(y.shape[0], y.shape[1], -1)
        x = x + self.proj(y)
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
        return x, k, v


class Gpt(nn.Module):
    """A GPT-2-style decoder. With past=True the inputs are input_ids [N, S] plus past_key_i /
    past_value_i [N, heads, P, d/heads] per layer and the outputs logits plus present_key_i /
    present_value_i [N, heads, P + S, d/heads]."""

    def __init__(self, vocab=8000, d=256, heads=4, layers=4, ff=1024, max_pos=256, past=False):
        super().__init__()
        self.past = past
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_pos, d)
        self.blocks = nn.ModuleList([GptBlock(d, heads, ff) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        with torch.no_grad():
            self.pos.weight.mul_(0.5)
            for m in self.modules():
                if isinstance(m, nn.LayerNorm):
                    m.weight.uniform_(0.8, 1.2)
                    m.bias.normal_(0, 0.05)

    def forward(self, input_ids, *past):
        s = input_ids.shape[1]
        p = past[0].shape[2] if past else 0
        qpos = torch.arange(s, device=input_ids.device) + p
        kpos = torch.arange(s + p, device=input_ids.device) if past else qpos
        bias = torch.where(kpos[None, :] <= qpos[:, None], torch.tensor(0.0), torch.tensor(-1e9))
        x = self.tok(input_ids) + self.pos(qpos).unsqueeze(0)
        presents = []
        for i, block in enumerate(self.blocks):
            if past:
                x, k, v = block(x, bias, past[2 * i], past[2 * i + 1])
                presents += [k, v]
            else:
                x, _, _ = block(x, bias)
        logits = self.head(self.ln(x))
        return (logits, *presents) if self.past else logits


GPT_LAYERS, GPT_SEQ = 4, 64


def build_gpt(past):
    def build():
        torch.manual_seed(seed_of("gpt_decoder"))  # gpt_decoder_past shares the weights
        model = Gpt(past=past)
        return model.eval()
    return build


def gpt_candidates(n, seq, vocab=8000):
    rng = np.random.default_rng(seed_of("gpt_decoder", "inputs"))
    return rng.integers(0, vocab, size=(n, seq)).astype(np.int64)


def gpt_inputs(model):
    cand = gpt_candidates(16, GPT_SEQ)
    return batch_1_and_8("gpt_decoder", model, cand)


def gpt_past_inputs(model):
    """Past keys / values of a 63-token prefix computed by the same model, and the 64th token."""
    full = model
    cand = gpt_candidates(16, GPT_SEQ)
    res = {}
    with torch.no_grad():
        out = full(torch.from_numpy(cand[:, :-1]), *[torch.zeros(16, 4, 0, 64)] * (2 * GPT_LAYERS))
        past = [o.numpy() for o in out[1:]]
        logits = full(torch.from_numpy(cand[:, -1:]), *[torch.from_numpy(p) for p in past])[0].numpy()
    good = np.nonzero(margins(logits) >= MARGIN)[0]
    require(len(good) >= 9, "gpt_decoder_past: too few rows with an argmax margin")
    for n, rows in ((1, good[:1]), (8, good[1:9])):
        res[n] = [cand[rows, -1:]] + [p[rows] for p in past]
    return res


def verify_gpt(model, inputs, outs):
    check_logits("gpt_decoder", outs[0], len(inputs[0]))


def verify_gpt_past(model, inputs, outs):
    check_logits("gpt_decoder_past", outs[0], len(inputs[0]))
    # The incremental step must agree with the full-sequence decoder's last position.
    full = Gpt(past=False)
    full.load_state_dict(model.state_dict())
    full.eval()
    ids = gpt_candidates(16, GPT_SEQ)
    with torch.no_grad():
        ref = full(torch.from_numpy(ids)).numpy()[:, -1]
    d = np.abs(ref[:, None, :] - outs[0][None, :, 0, :]).max(axis=2).min(axis=0)
    require(d.max() < 1e-3, f"gpt_decoder_past: step disagrees with the full decoder by {d.max():.3g}")


past_names = [f"past_{kv}_{i}" for i in range(GPT_LAYERS) for kv in ("key", "value")]
present_names = [f"present_{kv}_{i}" for i in range(GPT_LAYERS) for kv in ("key", "value")]
spec("gpt_decoder", "decoder", build_gpt(False), gpt_inputs, ["input_ids"], ["logits"],
     {"input_ids": seq_axes, "logits": seq_axes}, check="argmax:0", verify=verify_gpt,
     directory="gpt_decoder")
spec("gpt_decoder_past", "decoder", build_gpt(True), gpt_past_inputs, ["input_ids"] + past_names,
     ["logits"] + present_names,
     {"input_ids": seq_axes, "logits": seq_axes,
      **{n: {0: "batch", 2: "past_sequence"} for n in past_names},
      **{n: {0: "batch", 2: "total_sequence"} for n in present_names}},
     check="argmax:0", verify=verify_gpt_past, directory="gpt_decoder")


# ---- recurrent ----------------------------------------------------------------------------------


class LstmGru(nn.Module):
    """features [N, T, 40] -> 2-layer bidirectional LSTM (128) -> 2-layer bidirectional GRU (128)
    -> logits [N, 10] from the GRU's last forward / backward states, and the GRU outputs [N, T, 256]."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(40, 128, num_layers=2, bidirectional=True, batch_first=True)
        self.gru = nn.GRU(256, 128, num_layers=2, bidirectional=True, batch_first=True)
        self.fc = nn.Linear(256, 10)

    def forward(self, x):
        y, _ = self.lstm(x)
        y, h = self.gru(y)
        return self.fc(torch.cat([h[-2], h[-1]], dim=1)), y


class RnnTanh(nn.Module):
    """features [N, T, 40] -> 2-layer bidirectional tanh RNN (128) -> logits [N, 10] and outputs."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(40, 128, num_layers=2, nonlinearity="tanh", bidirectional=True, batch_first=True)
        self.fc = nn.Linear(256, 10)

    def forward(self, x):
        y, h = self.rnn(x)
        return self.fc(torch.cat([h[-2], h[-1]], dim=1)), y


class LongLstm(nn.Module):
    """features [N, T, 64] -> 2-layer LSTM (256) -> logits [N, 10] from the last state, outputs
    [N, T, 256]."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(64, 256, num_layers=2, batch_first=True)
        self.fc = nn.Linear(256, 10)

    def forward(self, x):
        y, (h, c) = self.lstm(x)
        return self.fc(h[-1]), y


def recurrent(name, ctor, steps, dim):
    def first(model):
        return lambda x: model(x)[0]

    def build():
        return ctor().eval()

    def inputs(model):
        rng = np.random.default_rng(seed_of(name, "inputs"))
        cand = smooth_features(rng, 12, steps, dim)
        return batch_1_and_8(name, first(model), cand, model.fc)

    def verify(model, inputs, outs):
        check_finite(name, outs)
        check_logits(name, outs[0], len(inputs[0]))
        require(outs[1].std() > 1e-2, f"{name}: recurrent outputs have no spread")

    axes = {0: "batch", 1: "time"}
    spec(name, "recurrent", build, inputs, ["features"], ["logits", "outputs"],
         {"features": axes, "logits": {0: "batch"}, "outputs": axes}, check="argmax:0", verify=verify)


recurrent("lstm_gru_bidirectional", LstmGru, 100, 40)
recurrent("rnn_tanh_bidirectional", RnnTanh, 100, 40)
recurrent("lstm_1000_steps", LongLstm, 1000, 64)


# ---- audio ----------------------------------------------------------------------------------------


def stft_symbolic(g, x, n_fft, hop_length, win_length, window, normalized, onesided, return_complex):
    """aten::stft (real input [N, L], a window, onesided, not normalised) -> ONNX STFT (opset 17)
    [N, frames, bins, 2], transposed to torch's [N, bins, frames, 2]."""
    from torch.onnx import symbolic_helper as sh
    n_fft = sh._get_const(n_fft, "i", "n_fft")
    hop = sh._get_const(hop_length, "i", "hop_length")
    signal = g.op("Unsqueeze", x, g.op("Constant", value_t=torch.tensor([-1])))
    step = g.op("Constant", value_t=torch.tensor(hop, dtype=torch.int64))
    length = g.op("Constant", value_t=torch.tensor(n_fft, dtype=torch.int64))
    out = g.op("STFT", signal, step, window, length, onesided_i=1)
    return g.op("Transpose", out, perm_i=[0, 2, 1, 3])


class AudioCnn(nn.Module):
    """audio [N, samples] at 16 kHz -> |STFT| (n_fft 400, hop 160, Hann, centred with reflect
    padding) -> log -> fixed mel-like projection (201 -> 64 bins) -> 1-D conv stack -> global
    average + max pooling -> logits [N, 35]. front "stft" uses torch.stft (-> ONNX STFT at opset
    17); front "conv" computes the same DFT as a strided Conv1d with cos / sin kernels (opset 13,
    where ONNX has no STFT)."""

    def __init__(self, n_fft=400, hop=160, bins=64, classes=35):
        super().__init__()
        self.n_fft, self.hop, self.front = n_fft, hop, "stft"
        window = torch.hann_window(n_fft, periodic=True)
        self.register_buffer("window", window)
        k = torch.arange(n_fft // 2 + 1, dtype=torch.float64)[:, None]
        t = torch.arange(n_fft, dtype=torch.float64)[None, :]
        ang = 2 * math.pi * k * t / n_fft
        basis = torch.cat([torch.cos(ang), -torch.sin(ang)]) * window.double()
        self.register_buffer("dft", basis.float()[:, None, :])
        # Triangular filters spaced evenly on the mel scale (fixed, not learned).
        freqs = torch.linspace(0, 8000, n_fft // 2 + 1)
        mel = 2595 * torch.log10(1 + freqs / 700)
        edges = torch.linspace(0, float(mel[-1]), bins + 2)
        lo, mid, hi = edges[:-2, None], edges[1:-1, None], edges[2:, None]
        fb = torch.clamp(torch.minimum((mel[None, :] - lo) / (mid - lo), (hi - mel[None, :]) / (hi - mid)), 0)
        self.register_buffer("mel", fb)
        self.convs = nn.Sequential(
            nn.Conv1d(bins, 128, 5, padding=2), nn.BatchNorm1d(128), nn.ReLU(),
            nn.Conv1d(128, 128, 3, stride=2, padding=1), nn.BatchNorm1d(128), nn.ReLU(),
            nn.Conv1d(128, 256, 3, stride=2, padding=1, dilation=1), nn.BatchNorm1d(256), nn.ReLU(),
            nn.Conv1d(256, 256, 3, padding=2, dilation=2), nn.BatchNorm1d(256), nn.ReLU())
        self.fc = nn.Linear(512, classes)

    def forward(self, audio):
        if self.front == "stft":
            spec = torch.stft(audio, self.n_fft, hop_length=self.hop, window=self.window, center=True,
                              pad_mode="reflect", onesided=True, return_complex=False)
            power = spec[..., 0] ** 2 + spec[..., 1] ** 2
        else:
            pad = self.n_fft // 2
            x = F.pad(audio.unsqueeze(1), (pad, pad), mode="reflect")
            spec = F.conv1d(x, self.dft, stride=self.hop)
            re, im = spec.chunk(2, dim=1)
            power = re * re + im * im
        feats = torch.log(torch.matmul(self.mel, torch.sqrt(power + 1e-10)) + 1e-6)
        y = self.convs(feats)
        return self.fc(torch.cat([y.mean(dim=2), y.amax(dim=2)], dim=1))


AUDIO_SAMPLES = 16000


def build_audio():
    model = AudioCnn()
    calibrate_bn(model, classifier_batches("audio_cnn", lambda rng, n: audio_clips(rng, n, AUDIO_SAMPLES)))
    return model


def audio_inputs(model):
    rng = np.random.default_rng(seed_of("audio_cnn", "inputs"))
    cand = audio_clips(rng, 12, AUDIO_SAMPLES)
    return batch_1_and_8("audio_cnn", model, cand, model.fc)


def audio_variant(model, opset):
    model.front = "stft" if opset >= 17 else "conv"


def verify_audio(model, inputs, outs):
    check_logits("audio_cnn", outs[0], len(inputs[0]))


spec("audio_cnn", "audio", build_audio, audio_inputs, ["audio"], ["logits"],
     {"audio": {0: "batch", 1: "samples"}, "logits": {0: "batch"}}, check="argmax:0",
     atol={13: 1e-4, 17: 7e-3}, verify=verify_audio, variant=audio_variant)
