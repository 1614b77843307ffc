"""A subword n-gram model as NeMo's token-level ARPA: each piece written as one character, its id + 100.

NeMo's CTC and RNN-T beam-search decoders (``pyctcdecode``, ``flashlight``, ``beamsearch_ngram``)
fuse a KenLM model over the *tokens* of a BPE/WordPiece acoustic model.  Its training script
(``scripts/asr_language_modeling/ngram_lm/train_kenlm.py``) writes every token of the text as the
character ``chr(token_id + 100)`` -- so a token is one "word" for KenLM, and no id falls on ASCII
control characters or the space -- and the decoders name the vocabulary the same way
(``chr(i + TOKEN_OFFSET)``, ``TOKEN_OFFSET = 100``).  An n-gram model trained here over the same
pieces (``ngramlm train TEXT --tokenizer bpe:N``, or any tokenizer whose pieces are the acoustic
model's) is written in that convention by renaming its vocabulary: the numbers are the model's own.

The ids are the *acoustic model's* tokenizer ids, given as its piece list (``tokenizer.vocab``, a
SentencePiece ``.vocab`` file, one piece a line, the id its line number): a piece of ours is written
as the character of its position there.  ``<s>``, ``</s>`` and ``<unk>`` keep their names, as
KenLM's ``lmplz`` writes them.  A piece the list lacks is an error naming it -- the two tokenizers
differ, and a decoder would never ask for it.
"""
from __future__ import annotations

import copy
from typing import Sequence

from corpora.errors import InputError
from corpora.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID

from ..tables import NgramTables

NEMO_TOKEN_OFFSET = 100  # NeMo's DEFAULT_TOKEN_OFFSET (kenlm_utils.py)


def read_token_list(path) -> list:
    """The acoustic model's pieces, by id: the first column of each line (``piece`` or a SentencePiece
    ``.vocab``'s ``piece<TAB>score``)."""
    with open(path, encoding="utf-8") as fh:
        out = [line.rstrip("\n").split("\t")[0] for line in fh]
    while out and out[-1] == "":
        out.pop()
    if not out:
        raise InputError("the token list is empty", path=path,
                         fix="pass the acoustic model's tokenizer vocabulary: one piece a line, in id order")
    return out


def nemo_tables(tables: NgramTables, tokens: Sequence[str], *, offset: int = NEMO_TOKEN_OFFSET) -> NgramTables:
    """``tables`` with every piece renamed ``chr(tokens.index(piece) + offset)`` (the arrays are shared)."""
    where = {}
    for i, t in enumerate(tokens):
        where.setdefault(t, i)
    vocab = tables.vocab
    keep = {PAD_ID: vocab.itos_[PAD_ID], BOS_ID: vocab.itos_[BOS_ID], EOS_ID: vocab.itos_[EOS_ID],
            UNK_ID: vocab.itos_[UNK_ID]}
    missing = [w for i, w in enumerate(vocab.itos_) if i not in keep and w not in where]
    if missing:
        show = ", ".join(repr(w) for w in missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise InputError(f"{len(missing)} of the model's {vocab.n_types} pieces are not in the token list: {show}",
                         fix="train the n-gram model on text cut by the acoustic model's own tokenizer "
                             "(or pass that tokenizer's full vocabulary)")
    if offset + len(tokens) > 0x10FFFF:
        raise InputError(f"{len(tokens)} tokens from offset {offset} run past the last Unicode code point",
                         fix="use NeMo's offset, 100")
    itos = [keep[i] if i in keep else chr(where[w] + offset) for i, w in enumerate(vocab.itos_)]
    renamed = copy.copy(vocab)
    renamed.itos_ = itos
    renamed.stoi_ = {w: i for i, w in enumerate(itos)}
    renamed.tokenizer = None  # the characters are ids now; the tokenizer's state would not apply to them
    return tables.replace(vocab=renamed)
