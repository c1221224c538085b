"""The login line's hook: /etc/profile.d/setui-login.sh, as ``service install`` writes it.

/etc/profile.d, not /etc/update-motd.d: a profile.d script runs as the user logging in,
so the socket's permissions (root and group setui) decide who sees the events, as they
decide who sees them in the dashboard; update-motd.d runs as root through pam_motd and
would show every user what only the group may read. /etc/profile sources it on every
system with a login shell of the sh family (Debian, Ubuntu, RHEL, SUSE, Alpine), in
login shells only; the hook itself goes on only in an interactive one.

The hook names the Python and the setui that installed it, as the unit does, and runs
setui.loginline with ``-I -S`` (no site-packages, no PYTHON* environment): see that
module for its budget. Its first lines mark it as setui's, so ``service uninstall``
removes it and nothing an administrator wrote under the same name.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

__all__ = ["LOGIN_HOOK", "MARKER", "is_ours", "render_hook"]

LOGIN_HOOK = Path("/etc/profile.d/setui-login.sh")
MARKER = "# Written by `setui service install`; `setui service uninstall` removes it."

_TEMPLATE = """\
# setui-login.sh: the login line of setui (docs/operating.md, "The login line").
{marker}
# In an interactive login shell, unless ~/.hushlogin exists: one line per scheduled event
# of this VM, asked of the agent at /run/setui/api.sock (SETUI_SOCKET names another) as
# the user logging in; nothing when there is no event, when the user may not reach the
# socket (root and group setui may), or when the agent does not answer within 0.1 s.
case $- in
*i*)
    if [ ! -e "${{HOME:-/nonexistent}}/.hushlogin" ] && [ -x {python} ]; then
        {python} -I -S -c {code} {site} </dev/null 2>/dev/null || :
    fi
    ;;
esac
"""
# -I leaves the current directory off sys.path and -S site-packages: setui's own directory
# is added by hand, after the standard library (a module there named as one of the
# library's, such as an old backport's enum.py, is never the one imported), and nothing
# else of the environment is looked at.
_CODE = ("import sys; sys.path.append(sys.argv[1]); "
         "from setui.loginline import main; main()")


def render_hook(python: str | None = None, site: Path | None = None) -> str:
    """The hook, running ``python`` (default: this one) with setui imported from ``site``
    (default: the directory this setui package is in)."""
    interpreter = sys.executable if python is None else python
    if site is None:
        import setui

        site = Path(setui.__file__).resolve().parent.parent
    return _TEMPLATE.format(marker=MARKER, python=shlex.quote(interpreter),
                            code=shlex.quote(_CODE), site=shlex.quote(str(site)))


def is_ours(text: str) -> bool:
    """Whether a file's text is a hook this module wrote (its marker among its first
    lines)."""
    return MARKER in text.splitlines()[:3]
