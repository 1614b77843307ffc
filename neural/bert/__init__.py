"""BERT as the textbook builds it: the encoder, its masked-LM and next-sentence heads, pseudo-perplexity
and sentence embeddings (:mod:`~neural.bert.model`), and pretraining (:mod:`~neural.training.bert`).
"""
