#pragma once
// The host-side pieces the text decoders' key/value-cache generation shares (GPT2Decoder,
// LlamaDecoder): a product that is a matrix-vector product for one row, and one query attending
// to the cached keys and values.
#include "backend/backend.h"

namespace sg {

// out (N,OC) = inp (N,C) @ weight (OC,C)^T (+ bias when not null). One row (a generation step)
// is cblas_sgemv: OpenBLAS 0.3.21's sgemm packs the whole weight even for one row, which made it
// 3-4x slower than sgemv at GPT-2 124M's shapes (measured, 768x2304 to 768x50304); more rows are
// the backend's matmul.
void decode_linear(Backend& backend, float* out, const float* inp, const float* weight,
                   const float* bias, int N, int C, int OC);

// out (C) = softmax(q K^T / sqrt(hs)) V per head over cached positions [0, keys); q (C); K and V
// (keys, C) position-major, head h in columns [h*hs, (h+1)*hs); scores: NH * keys floats of
// scratch. One query needs no causal mask and keeps nothing for a backward pass.
void attend_cached(float* out, const float* q, const float* K, const float* V, int keys, int C,
                   int NH, float* scores);

// The attention of P new positions [start, start + P) of a cached decoder: their keys and values
// (packed rows [q | k | v], C each) appended to the cache K, V (context, C), then out (P, C):
// for a prompt (start 0) causal attention among its own positions as in training (att: the
// backend's attention state), for one step the query against the cache (att: its scores).
void decode_attention(Backend& backend, float* out, float* att, const float* qkv, float* K,
                      float* V, int start, int P, int C, int NH);

}  // namespace sg
