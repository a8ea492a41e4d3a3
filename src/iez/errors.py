"""One exception family, so the CLI can print bad input as one clear line."""


class IezError(Exception):
    """Base for every error iez reports to a user (bad input, missing backend, ...)."""


class ConfigError(IezError):
    """A cluster or plan file that cannot be used."""


class LayoutError(IezError):
    """A layout that Lustre would reject, or a malformed lov_user_md buffer."""


class AllocationError(IezError):
    """No placement satisfies the request (full OSTs, unknown OST index, ...)."""


class BackendError(IezError):
    """A file-system operation failed or is unavailable on this backend."""
