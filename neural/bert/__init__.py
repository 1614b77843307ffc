"""BERT as the textbook builds it: the encoder, its masked-LM and next-sentence heads, pseudo-perplexity
and sentence embeddings (:mod:`~neural.bert.model`), pretraining (:mod:`~neural.training.bert`), and
fine-tuning on a sentence-pair task built from a corpus (:mod:`~neural.bert.finetune`).
"""
