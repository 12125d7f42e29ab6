"""Shape letters used in array-name suffixes and docstrings across chessjax (one meaning each).

A suffix names an array's axes in order: `h_BTD` is [batch, steps, width], `x_BD` one step of it.

    B  batch (games / sequences)
    T  steps: tokens of a sequence (move ids, with START first and PAD on the right)
    D  model width (d)
    H  heads
    K  key / query head dim (Gated DeltaNet, attention)
    V  value head dim (Gated DeltaNet); vocabulary sizes have no letter (`vocab_size`)
    P  SSM head dim: channels of x per head (Mamba; the value side of SSD)
    N  SSM state size (Mamba's B / C width; the key side of SSD)
    R  MIMO rank (Mamba-3; 1 = SISO)
    G  channel groups: Mamba's B / C groups, SLiCE's diagonal blocks
    b  SLiCE block size (D = G b)
    S  rotation angles per head (Mamba-3)
    C  chunk length of a chunked scan
    M  number of chunks (T = M C after padding)
    W  width of a causal convolution window
    F  channels of a projection that a short convolution runs over
    L  state labels (75 per position; `chessjax.labels`)

Logits are written [B, T, out]: out = 1878 for the state head, `vocab_size` for a token head.
Classes per label have no letter (they vary by label group, `chessjax.labels.GROUPS`).
"""
