"""Hub accounts that need no Unix user each (`make hub PODS=1`): NativeAuthenticator, sign-up closed, its accounts
made from the course's own list, on JupyterHub's own login page.

On Zero to JupyterHub no learner has a Unix user, so PAM cannot log them in. NativeAuthenticator keeps each account
and its bcrypt-hashed password in the hub's own database; `CourseAccounts` only closes its sign-up page and adds the
accounts of `accounts_file` (hub/hubctl.py's root-only `state/passwords`: one `name password` a line) that the
database does not have yet, each already authorized. It reads the file again before each login, so a student
enrolled while the hub runs (`make hub-enroll`) can log in at once. The new passwords are hashed in a thread, one
import at a time: bcrypt takes about a quarter of a second a password, and a class of 200 hashed on the hub's event
loop at its first login would stop every other request of the hub for most of a minute. A password a learner has changed on
/hub/change-password stays theirs: an account already in the database is never touched.

    c.JupyterHub.authenticator_class = "addnorm_grading.hub_accounts.CourseAccounts"
    c.CourseAccounts.accounts_file = "/opt/addnorm-hub/state/passwords"
"""

from __future__ import annotations

import asyncio
from functools import cached_property
from pathlib import Path

import bcrypt
from nativeauthenticator import NativeAuthenticator
from nativeauthenticator.orm import UserInfo
from traitlets import Bool, Unicode


def read_accounts(path: Path) -> dict[str, str]:
    """`name password` lines (the password may hold spaces); a missing file holds no account."""
    if not path.is_file():
        return {}
    return dict(line.split(" ", 1) for line in path.read_text().splitlines() if " " in line)


def hash_passwords(passwords: dict[str, str]) -> dict[str, bytes]:
    """Each password bcrypt-hashed with a salt of its own (bcrypt releases the GIL while it works)."""
    return {name: bcrypt.hashpw(password.encode(), bcrypt.gensalt()) for name, password in passwords.items()}


class CourseAccounts(NativeAuthenticator):
    """NativeAuthenticator whose accounts are the course's: no sign-up, each account made from `accounts_file`."""

    accounts_file = Unicode("", help="`name password` lines: the accounts to make (root only)").tag(config=True)
    enable_signup = Bool(False, help="Nobody signs up: the instructor's tools make the accounts").tag(config=True)
    allow_all = Bool(True, help="Every account may log in: only the course's are ever made").tag(config=True)

    @cached_property
    def importing(self) -> asyncio.Lock:
        """Held while accounts are imported: one import at a time."""
        return asyncio.Lock()

    def new_accounts(self) -> dict[str, str]:
        """The accounts of the file that the database lacks: {normalized name: password}."""
        accounts = {self.normalize_username(name): password
                    for name, password in read_accounts(Path(self.accounts_file)).items()}
        return {name: password for name, password in accounts.items() if self.get_user(name) is None}

    async def import_accounts(self) -> list[str]:
        """Add every account of the file that the database lacks, authorized; return their names."""
        async with self.importing:                   # a second login waits for the first one's import
            wanted = self.new_accounts()
            if not wanted:
                return []
            hashed = await asyncio.get_running_loop().run_in_executor(None, hash_passwords, wanted)
            for name, password in hashed.items():    # the database only on the event loop's thread
                self.db.add(UserInfo(username=name, password=password, is_authorized=True))
            self.db.commit()
        self.log.info("made %d course accounts: %s", len(hashed), ", ".join(hashed))
        return list(hashed)

    def get_handlers(self, app):
        """Of NativeAuthenticator's pages only the password change (sign-up and approval have nothing to do here).
        The login page is JupyterHub's own: NativeAuthenticator 1.3.0's times each login with the statsd client
        that JupyterHub 6 no longer has, and fails every login."""
        return [(path, handler) for path, handler in super().get_handlers(app)
                if path.startswith("/change-password")]

    async def authenticate(self, handler, data):
        await self.import_accounts()
        return await super().authenticate(handler, data)
