"""One game as one compact binary record (the payload of every ArrayRecord shard).

Layout before compression (little-endian):
  magic b"CJG1" | steps uint32 | id length uint16 | result uint8 | id (UTF-8)
  | moves uint16[steps] | states, XOR-delta over time, stored label-major uint8[75, steps]
The XOR with the previous step zeroes everything a move leaves unchanged, and label-major order
puts those zeros in long runs, so zstd level 3 shrinks a game to about 650 bytes (the released
JSONL needs about 17 KB). Decoding is one zstd call and two numpy ops.
"""

import struct
import threading

import numpy as np
import zstandard

from chessjax.labels import NUM_LABELS

MAGIC = b"CJG1"
_HEADER = struct.Struct("<4sIHB")
RESULTS = ("*", "1-0", "0-1", "1/2-1/2")
_RESULT_CODE = {r: i for i, r in enumerate(RESULTS)}
_ZSTD_LEVEL = 3


def encode_record(moves: np.ndarray, states: np.ndarray, example_id: str, result: str) -> bytes:
  """Serialises one game: moves int[T+1], states uint8[T+1, 75], its id and PGN result."""
  steps = len(moves)
  if states.shape != (steps, NUM_LABELS):
    raise ValueError(f"states shape {states.shape} does not match {steps} moves")
  delta = np.array(states, dtype=np.uint8, copy=True)
  delta[1:] ^= states[:-1]
  ident = example_id.encode("utf-8")
  payload = b"".join(
    (
      _HEADER.pack(MAGIC, steps, len(ident), _RESULT_CODE.get(result, 0)),
      ident,
      np.asarray(moves, dtype="<u2").tobytes(),
      np.ascontiguousarray(delta.T).tobytes(),
    )
  )
  return zstandard.ZstdCompressor(level=_ZSTD_LEVEL).compress(payload)


_local = threading.local()


def _decompressor() -> zstandard.ZstdDecompressor:
  # Building a decompressor costs about as much as decoding a game; keep one per thread.
  if not hasattr(_local, "dctx"):
    _local.dctx = zstandard.ZstdDecompressor()
  return _local.dctx


def record_steps(record: bytes) -> int:
  """Number of steps (plies + 1) of a record, read from its header alone."""
  header = _decompressor().stream_reader(record).read(_HEADER.size)
  magic, steps, _, _ = _HEADER.unpack(header)
  if magic != MAGIC:
    raise ValueError(f"not a chessjax game record (magic {magic!r})")
  return steps


def decode_record(record: bytes) -> dict:
  """Inverse of `encode_record`: a dict with moves, states, example_id, result and plies."""
  raw = _decompressor().decompress(record)
  magic, steps, id_len, result = _HEADER.unpack_from(raw)
  if magic != MAGIC:
    raise ValueError(f"not a chessjax game record (magic {magic!r})")
  at = _HEADER.size
  example_id = raw[at : at + id_len].decode("utf-8")
  at += id_len
  moves = np.frombuffer(raw, dtype="<u2", count=steps, offset=at).astype(np.int32)
  at += 2 * steps
  delta = np.frombuffer(raw, dtype=np.uint8, count=steps * NUM_LABELS, offset=at)
  states = np.bitwise_xor.accumulate(delta.reshape(NUM_LABELS, steps), axis=1).T.copy()
  return {
    "moves": moves,
    "states": states,
    "example_id": example_id,
    "result": RESULTS[result],
    "plies": steps - 1,
  }


def decode_moves(record: bytes) -> np.ndarray:
  """The moves int32[steps] of a record alone (skips the state labels' XOR-delta decoding)."""
  raw = _decompressor().decompress(record)
  magic, steps, id_len, _ = _HEADER.unpack_from(raw)
  if magic != MAGIC:
    raise ValueError(f"not a chessjax game record (magic {magic!r})")
  return np.frombuffer(raw, dtype="<u2", count=steps, offset=_HEADER.size + id_len).astype(np.int32)
