"""Provider options: the ``options`` mapping a ``create_plugin`` factory receives, parsed once.

Each provider declares a pydantic model deriving from :class:`ProviderOptions` (one field per
option; live objects such as a ``kube`` client or a ``clock`` are ``Any`` fields) and calls
:meth:`ProviderOptions.parse`. An unknown option is a :class:`~karpy_core.errors.ConfigurationError`
naming it and listing the valid ones; a value of the wrong type names the option and the problem,
never the value (options may carry credentials).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, ValidationError

from karpy_core.errors import ConfigurationError

__all__ = ["ProviderOptions"]


class ProviderOptions(BaseModel):
    """Base of a provider's options model.

    Class attributes:
        provider: the provider's name, for messages (``aws provider: unknown option(s) ...``).
        passthrough: further accepted option names that are not fields (e.g. the fields of a
            settings dataclass the provider applies itself); they land in ``model_extra``.
    """

    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True, frozen=True)

    provider: ClassVar[str] = "cloud"
    passthrough: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def option_names(cls) -> frozenset[str]:
        """Every accepted option name."""
        return frozenset(cls.model_fields) | cls.passthrough

    @classmethod
    def parse(cls, options: Mapping[str, Any] | None) -> Self:
        """Validate ``options`` into the model.

        Raises:
            ConfigurationError: an unknown option (named, with the valid ones listed) or a value
                of the wrong type (option and problem named, value withheld).
        """
        opts = dict(options or {})
        valid = cls.option_names()
        unknown = sorted(set(opts) - valid)
        if unknown:
            raise ConfigurationError(
                f"{cls.provider} provider: unknown option(s) {', '.join(unknown)}; valid: {', '.join(sorted(valid))}"
            )
        try:
            return cls.model_validate(opts)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
            raise ConfigurationError(f"{cls.provider} provider: invalid option(s): {problems}") from None

    def extra(self) -> dict[str, Any]:
        """The passthrough options given (name -> value)."""
        return dict(self.model_extra or {})

    def fields_dict(self) -> dict[str, Any]:
        """The declared fields as a name -> value dict (values as given, not serialized)."""
        return {name: getattr(self, name) for name in type(self).model_fields}
