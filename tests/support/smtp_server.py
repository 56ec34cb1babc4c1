"""A real SMTP server for bai's mail tests (aiosmtpd, from PyPI), on loopback.

With --cert/--key it offers STARTTLS and refuses mail without it; with --user/--password it
asks for AUTH (only after STARTTLS). Each message received is written whole to
<dir>/<n>.eml (first as .tmp, then renamed), so a test reads complete messages only.
"""
import argparse
import itertools
import ssl
import threading
from pathlib import Path

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword


class Save:
    def __init__(self, out: Path):
        self.out = out
        self.n = itertools.count()

    async def handle_DATA(self, server, session, envelope):
        path = self.out / f"{next(self.n):04d}.eml"
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(envelope.original_content or envelope.content)
        tmp.rename(path)
        return "250 Message accepted"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--cert")
    p.add_argument("--key")
    p.add_argument("--user")
    p.add_argument("--password")
    a = p.parse_args()
    out = Path(a.dir)
    out.mkdir(parents=True, exist_ok=True)
    kwargs = {}
    if a.cert:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(a.cert, a.key)
        kwargs.update(tls_context=ctx, require_starttls=True)
    if a.user:

        def check(server, session, envelope, mechanism, auth_data):
            ok = (
                isinstance(auth_data, LoginPassword)
                and auth_data.login == a.user.encode()
                and auth_data.password == a.password.encode()
            )
            return AuthResult(success=ok)

        kwargs.update(authenticator=check, auth_required=True, auth_require_tls=bool(a.cert))
    controller = Controller(Save(out), hostname="127.0.0.1", port=a.port, **kwargs)
    controller.start()
    print(f"SMTP listening on 127.0.0.1:{a.port}", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
