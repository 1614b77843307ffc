"""Sequence to sequence: the GRU encoder-decoder with and without Bahdanau attention
(:mod:`~neural.seq2seq.rnn`), the encoder-decoder Transformer (:mod:`~neural.seq2seq.transformer`),
sentence pairs (:mod:`~neural.seq2seq.pairs`), their training loop (:mod:`~neural.training.seq2seq`)
and greedy/beam translation (:mod:`~neural.seq2seq.translate`).
"""
