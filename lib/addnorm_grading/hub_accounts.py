"""Hub accounts that need no Unix user each (`make hub PODS=1`): NativeAuthenticator, sign-up closed, its accounts
made from the course's own list, on JupyterHub's own login page.

On Zero to JupyterHub no learner has a Unix user, so PAM cannot log them in. NativeAuthenticator keeps each account
and its bcrypt-hashed password in the hub's own database; `CourseAccounts` only closes its sign-up page and adds the
accounts of `accounts_file` (hub/hubctl.py's root-only `state/passwords`: one `name password` a line) that the
database does not have yet, each already authorized. It reads the file again before each login, so a student
enrolled while the hub runs (`make hub-enroll`) can log in at once. A password a learner has changed on
/hub/change-password stays theirs: an account already in the database is never touched.

    c.JupyterHub.authenticator_class = "addnorm_grading.hub_accounts.CourseAccounts"
    c.CourseAccounts.accounts_file = "/opt/addnorm-hub/state/passwords"
"""

from __future__ import annotations

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


class CourseAccounts(NativeAuthenticator):
    """NativeAuthenticator whose accounts are the course's: no sign-up, each account made from `accounts_file`."""

    accounts_file = Unicode("", help="`name password` lines: the accounts to make (root only)").tag(config=True)
    enable_signup = Bool(False, help="Nobody signs up: the instructor's tools make the accounts").tag(config=True)
    allow_all = Bool(True, help="Every account may log in: only the course's are ever made").tag(config=True)

    def import_accounts(self) -> list[str]:
        """Add every account of the file that the database lacks, authorized; return their names."""
        added = []
        for name, password in read_accounts(Path(self.accounts_file)).items():
            name = self.normalize_username(name)
            if self.get_user(name) is None:
                hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt())
                self.db.add(UserInfo(username=name, password=hashed, is_authorized=True))
                added.append(name)
        if added:
            self.db.commit()
            self.log.info("made %d course accounts: %s", len(added), ", ".join(added))
        return added

    def get_handlers(self, app):
        """Of NativeAuthenticator's pages only the password change (sign-up and approval have nothing to do here).
        The login page is JupyterHub's own: NativeAuthenticator 1.3.0's times each login with the statsd client
        that JupyterHub 6 no longer has, and fails every login."""
        return [(path, handler) for path, handler in super().get_handlers(app)
                if path.startswith("/change-password")]

    async def authenticate(self, handler, data):
        self.import_accounts()
        return await super().authenticate(handler, data)
