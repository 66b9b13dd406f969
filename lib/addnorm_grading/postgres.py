"""A PostgreSQL cluster for the gradebook, for when grading leaves one machine: Debian's `postgresql` package, run
in a state folder by the Unix user who owns the course (never root: PostgreSQL refuses it).

    cluster = Cluster(Path("/opt/addnorm-hub/postgres"), owner="instructor")
    cluster.create()          # initdb: its own role, a random password in a file only the owner can read
    cluster.start()
    db_url = cluster.url()    # for nbgrader's CourseDirectory.db_url: nbgrader's Gradebook makes the tables
    cluster.stop()

Every connection needs the password (scram-sha-256 for the socket and for TCP alike), so a learner with a terminal
on the same machine, who can reach the port on loopback, cannot read or write a grade: the password file and the
data folder are the owner's alone (0600 and 0700). The server listens on loopback and on a socket in the folder.
"""

from __future__ import annotations

import os
import pwd
import secrets
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

import psycopg

ROLE = "addnorm"
DATABASE = "gradebook"


def server_programs() -> Path:
    """The folder of Debian's PostgreSQL programs (the newest version installed)."""
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=lambda p: int(p.parent.parent.name))
    if not versions:
        raise FileNotFoundError("PostgreSQL's server programs are not installed: expected /usr/lib/postgresql/<version>"
                                "/bin/pg_ctl, from Debian's package (apt-get install postgresql)")
    return versions[-1].parent


def free_port() -> int:
    """A TCP port free on loopback now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass(frozen=True)
class Cluster:
    """One PostgreSQL cluster: its data, socket and password under `folder`, run by `owner`."""

    folder: Path
    owner: str

    @property
    def data(self) -> Path:
        return self.folder / "data"

    @property
    def password_file(self) -> Path:
        return self.folder / "password"

    @property
    def port_file(self) -> Path:
        return self.folder / "port"

    def run(self, *command: str, check: bool = True) -> subprocess.CompletedProcess:
        """A PostgreSQL program run as the cluster's owner; a failure raises with what it said (unless not `check`)."""
        program = [str(server_programs() / command[0]), *command[1:]]
        if pwd.getpwuid(os.geteuid()).pw_name != self.owner:
            program = ["runuser", "-u", self.owner, "--", *program]
        result = subprocess.run(program, capture_output=True, text=True, cwd="/")
        if result.returncode and check:
            raise RuntimeError(f"{command[0]} failed ({result.returncode}): {(result.stderr or result.stdout)[-800:]}")
        return result

    def create(self) -> None:
        """A new cluster: the owner's folder (0700), a random password (0600), the role and the gradebook database."""
        user = pwd.getpwnam(self.owner)
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=False)
        os.chown(self.folder, user.pw_uid, user.pw_gid)
        descriptor = os.open(self.password_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(secrets.token_urlsafe(24))
        os.chown(self.password_file, user.pw_uid, user.pw_gid)
        self.run("initdb", "--pgdata", str(self.data), "--username", ROLE, "--pwfile", str(self.password_file),
                 "--auth", "scram-sha-256", "--encoding", "UTF8", "--locale", "C.UTF-8")
        self.port_file.write_text(str(free_port()))
        os.chown(self.port_file, user.pw_uid, user.pw_gid)
        self.start()
        with psycopg.connect(self.url(database="postgres", driver=""), autocommit=True) as connection:
            connection.execute(f"CREATE DATABASE {DATABASE}")

    @property
    def port(self) -> str:
        return self.port_file.read_text().strip()

    def start(self) -> None:
        """Start the server (listening on loopback and on a socket in the folder) and wait until it accepts."""
        options = f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories={self.folder}"
        self.run("pg_ctl", "--pgdata", str(self.data), "--log", str(self.folder / "server.log"), "--wait",
                 "--options", options, "start")

    def stop(self) -> None:
        """Stop the server (fast: open transactions are rolled back; what was committed stays)."""
        self.run("pg_ctl", "--pgdata", str(self.data), "--wait", "--mode", "fast", "stop")

    def restart(self) -> None:
        self.stop()
        self.start()

    def running(self) -> bool:
        return self.run("pg_ctl", "--pgdata", str(self.data), "status", check=False).returncode == 0

    def url(self, database: str = DATABASE, driver: str = "+psycopg") -> str:
        """The gradebook's SQLAlchemy URL (with driver="": libpq's own). It holds the password: give it only to the
        instructor's processes."""
        password = self.password_file.read_text().strip()
        return f"postgresql{driver}://{ROLE}:{password}@127.0.0.1:{self.port}/{database}"


def main(argv: list[str] | None = None) -> None:
    """`python -m addnorm_grading.postgres up|down FOLDER --owner USER` (make hub, make hub-down): up makes the cluster
    if there is none and starts it if it is not running; down stops it if it runs. Neither prints the password."""
    import argparse

    parser = argparse.ArgumentParser(description="The course's PostgreSQL gradebook cluster (addnorm_grading.postgres).")
    parser.add_argument("action", choices=["up", "down"])
    parser.add_argument("folder", type=Path, help="the cluster's folder (its data, socket and password)")
    parser.add_argument("--owner", required=True, help="the Unix user who runs it (the course's owner, not root)")
    args = parser.parse_args(argv)
    if args.owner == "root":
        parser.error("--owner: expected the course's owner; PostgreSQL refuses to run as root")
    cluster = Cluster(args.folder, args.owner)
    made = args.action == "up" and not cluster.data.is_dir()
    if made:
        cluster.create()                     # also starts it
    elif args.action == "up" and not cluster.running():
        cluster.start()
    elif args.action == "down" and cluster.data.is_dir() and cluster.running():
        cluster.stop()
    if not cluster.data.is_dir():
        state = "no cluster"
    else:
        state = "made and started" if made else "running" if cluster.running() else "stopped"
    print(f"[postgres] {args.folder}: {state} (owner {args.owner})")


if __name__ == "__main__":
    main()
