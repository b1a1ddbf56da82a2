"""Provider options: the ``options`` mapping a ``create_plugin`` factory receives, parsed once.

Each provider declares a pydantic model deriving from :class:`ProviderOptions` (one field per
option; live objects such as a ``kube`` client or a ``clock`` are ``Any`` fields) and calls
:meth:`ProviderOptions.parse`. An unknown option is a :class:`~karpy_core.errors.ConfigurationError`
naming it and listing the valid ones; a value of the wrong type names the option and the problem,
never the value (options may carry credentials).

Options typed on the command line (``karpy simulate|controller --provider-option NAME=VALUE``)
arrive as strings; pydantic's lax mode turns them into the declared scalar types (``"3"`` -> 3,
``"true"`` -> True, ``"0.5"`` -> 0.5), and :meth:`ProviderOptions.parse` reads a string given for
a collection field first: a list, tuple or set option from ``a,b,c`` (or JSON when it starts with
``[``), a dict option from JSON.
"""

from __future__ import annotations

import json
import types
from collections.abc import Mapping
from typing import Any, ClassVar, Self, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from karpy_core.errors import ConfigurationError

__all__ = ["HOST_OPTIONS", "ProviderOptions", "coerce_text", "missing_setting", "refuse_host_text"]

HOST_OPTIONS = frozenset({"kube"})
"""Options karpy itself passes to every provider's factory (the Kubernetes client): never text,
whatever the provider (a third-party plugin's options model need not list them in ``objects``)."""


def refuse_host_text(provider: str, options: Mapping[str, Any], objects: frozenset[str] = frozenset()) -> None:
    """Refuse text (a ``--provider-option NAME=VALUE``) for :data:`HOST_OPTIONS` or ``objects``.

    Raises:
        ConfigurationError: naming the options given as text.
    """
    texts = sorted(name for name in HOST_OPTIONS | objects if isinstance(options.get(name), str))
    if texts:
        raise ConfigurationError(
            f"{provider} provider: option(s) {', '.join(texts)} take an object the program passes "
            f"(karpy sets them itself), not text"
        )

_SEQUENCES = (list, tuple, set, frozenset)


def missing_setting(provider: str, what: str, option: str, *, simulate: str, controller: str, also: str = "") -> ConfigurationError:
    """The one wording, for every provider, of a required setting that nothing gave: what it is, the
    provider option that sets it, how to give it to ``karpy simulate``/``validate`` and to ``karpy
    controller`` (its flag and Karpenter's environment variable), e.g. ``aws provider: the cluster
    name is required: option cluster_name (karpy simulate and validate: --provider-option
    cluster_name=NAME; karpy controller: --cluster-name or CLUSTER_NAME)``.

    Args:
        provider: the provider's name (``aws``).
        what: the setting in words (``the cluster name``).
        option: the provider option's name (``cluster_name``).
        simulate: how ``karpy simulate``/``validate`` give it (``--provider-option cluster_name=NAME``).
        controller: how ``karpy controller`` gets it (``--cluster-name or CLUSTER_NAME``).
        also: further sources, appended after ``, or `` (``a region in the shared AWS config``).

    Returns:
        The :class:`~karpy_core.errors.ConfigurationError` to raise (exit 2 at the command line).
    """
    more = f", or {also}" if also else ""
    return ConfigurationError(f"{provider} provider: {what} is required: option {option} "
                              f"(karpy simulate and validate: {simulate}; karpy controller: {controller}){more}")


def _collection_origin(annotation: Any) -> Any:
    """``list``/``tuple``/``set``/``frozenset``/``dict`` when ``annotation`` is one of them (or an
    Optional of one), else None."""
    origin = get_origin(annotation)
    if origin is Union or origin is types.UnionType:
        found = [o for o in (_collection_origin(a) for a in get_args(annotation)) if o is not None]
        return found[0] if len(found) == 1 else None
    candidate = origin or annotation
    if candidate is Mapping:
        return dict
    return candidate if candidate in (*_SEQUENCES, dict) else None


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _json_shape(origin: Any, annotation: Any) -> str:
    """What a collection option of objects takes, for messages (``a list of objects``, ``an
    object``), or ``""`` when its items are scalars (comma-separated text is fine for those)."""
    if origin is dict:
        return "an object"
    while get_origin(annotation) is Union or get_origin(annotation) is types.UnionType:
        found = [a for a in get_args(annotation) if _collection_origin(a) is not None]
        if len(found) != 1:
            return ""
        annotation = found[0]
    items = get_args(annotation)
    item = items[0] if items else None
    structured = (isinstance(item, type) and issubclass(item, BaseModel)) or _collection_origin(item) is dict
    return "a list of objects ('[{...}, ...]')" if structured else ""


def _read_text(origin: Any, text: str) -> Any:
    """A command-line string for a collection option, read as described in the module docstring
    (left as is when it does not parse: the model's validation then names the option)."""
    stripped = text.strip()
    if origin is dict or stripped.startswith("["):
        try:
            return json.loads(stripped)
        except ValueError:
            return text
    return [part.strip() for part in stripped.split(",") if part.strip()]


def coerce_text(provider: str, option: str, annotation: Any, value: Any) -> Any:
    """``value`` as ``annotation`` when it is a command-line string (read as in the module
    docstring, then validated by pydantic in lax mode); any other value is returned unchanged.
    For options that are not model fields (a provider's ``passthrough`` names).

    Raises:
        ConfigurationError: the string is not of that type (option named, value withheld).
    """
    if not isinstance(value, str):
        return value
    origin = _collection_origin(annotation)
    text: Any = _read_text(origin, value) if origin is not None else value
    try:
        return TypeAdapter(annotation).validate_python(text)
    except ValidationError as exc:
        problems = "; ".join(e["msg"] for e in exc.errors())
        raise ConfigurationError(f"{provider} provider: invalid option(s): {option}: {problems}") from None


class ProviderOptions(BaseModel):
    """Base of a provider's options model.

    Class attributes:
        provider: the provider's name, for messages (``aws provider: unknown option(s) ...``).
        passthrough: further accepted option names that are not fields (e.g. the fields of a
            settings dataclass the provider applies itself); they land in ``model_extra``.
        objects: options that take a Python object the host program passes (a KubeClient, a
            clock, a session): text for them (``--provider-option kube=foo``) is refused, not
            silently replaced, and they are left out of the "valid:" list of an unknown option.
    """

    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True, frozen=True)

    provider: ClassVar[str] = "cloud"
    passthrough: ClassVar[frozenset[str]] = frozenset()
    objects: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def option_names(cls) -> frozenset[str]:
        """Every accepted option name."""
        return frozenset(cls.model_fields) | cls.passthrough

    @classmethod
    def parse(cls, options: Mapping[str, Any] | None) -> Self:
        """Validate ``options`` into the model.

        Args:
            options: option name -> value; Python values as they are, or the strings of
                ``--provider-option NAME=VALUE`` (see the module docstring).

        Raises:
            ConfigurationError: an unknown option (named, with the valid ones listed), text for
                an option in :attr:`objects` or :data:`HOST_OPTIONS`, or a value of the wrong type (option and problem
                named, value withheld).
        """
        opts = dict(options or {})
        valid = cls.option_names()
        unknown = sorted(set(opts) - valid)
        if unknown:
            raise ConfigurationError(
                f"{cls.provider} provider: unknown option(s) {', '.join(unknown)}; "
                f"valid: {', '.join(sorted(valid - cls.objects - HOST_OPTIONS))}"
            )
        refuse_host_text(cls.provider, opts, cls.objects)
        structured: dict[str, str] = {}  # option given as text that is not JSON, whose items are objects -> the shape
        for name, value in opts.items():
            field = cls.model_fields.get(name)
            origin = _collection_origin(field.annotation) if field is not None and isinstance(value, str) else None
            if origin is not None:
                opts[name] = _read_text(origin, value)
                shape = _json_shape(origin, field.annotation) if field is not None else ""
                if shape and not (_is_json(value) and value.strip()[:1] == ("{" if origin is dict else "[")):
                    structured[name] = shape
        try:
            return cls.model_validate(opts)
        except ValidationError as exc:
            problems = []
            for e in exc.errors():
                name = str(e["loc"][0]) if e["loc"] else ""
                if name in structured:
                    # "reservations.0: Input should be a valid dictionary or instance of SimulatedReservation"
                    # for text split at commas (trial 18): say what the option takes instead
                    line = f"{name}: expected {structured[name]} in JSON; the text given is not one"
                else:
                    line = f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                if line not in problems:
                    problems.append(line)
            raise ConfigurationError(f"{cls.provider} provider: invalid option(s): {'; '.join(problems)}") from None

    def extra(self) -> dict[str, Any]:
        """The passthrough options given (name -> value)."""
        return dict(self.model_extra or {})

    def fields_dict(self) -> dict[str, Any]:
        """The declared fields as a name -> value dict (values as given, not serialized)."""
        return {name: getattr(self, name) for name in type(self).model_fields}
