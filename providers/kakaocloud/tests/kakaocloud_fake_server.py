"""A fake KakaoCloud OpenAPI (kr-central-2) for tests, served by aiohttp on 127.0.0.1.

Modelled on ``reference/kakaocloud-api.md`` ([SDK] shapes, [TF] limits, [INF] lifecycle): one
server, one path prefix per service (``/iam``, ``/bcs``, ``/vpc``, ``/network``, ``/volume``,
``/ke``) standing in for the per-service hosts, so :meth:`FakeKakaoCloud.endpoints` gives the
provider's base URLs.

* IAM: ``POST /identity/v3/auth/tokens`` -> 201, ``X-Subject-Token``, ``token.expires_at``
  (``token_ttl`` seconds); bad credentials -> 401 Keystone body. Other calls need a live
  ``X-Auth-Token`` (401 otherwise).
* Wrapped bodies, ``limit``/``offset`` pagination with ``pagination.total``, substring ``name``
  filter, ``{"error": {code, message}}`` errors.
* Instances: create -> ``building`` until read ``build_reads`` times, then ``active`` (or
  ``error`` when :attr:`fail_builds` > 0); DELETE -> ``deleting`` until read ``delete_reads``
  times, then 404. Name, description (<= 100 characters, §2.6 characters), user data (base64,
  <= 16 KB), image/flavor/subnet/security-group-name/key-pair references are validated (400).
* Injection: :meth:`inject` makes matching calls answer a status (429, 5xx, 401...) a number of
  times; ``create_anyway`` makes an injected error happen *after* the call was carried out (e.g.
  the VM created); ``delay`` carries the call out and holds its answer (a read timeout).
* :meth:`expire_tokens` expires every issued token.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import itertools
import json
import re
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_-]*[a-zA-Z0-9]$")
DESCRIPTION = re.compile(r"""^[a-zA-Z0-9ㄱ-ㅎ가-힣 .,!?()\[\]{}:;"'@#%&*+=_/\\|<>~-]*$""")
CLUSTER_ID = "8f3c1a52-6a1e-4f5e-9a0b-2c5d7e8f9a01"


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.000000Z")


def _err(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message}}, status=status)


@dataclass
class Injection:
    status: int
    method: str | None
    path: re.Pattern[str] | None
    times: int
    code: str
    create_anyway: bool = False
    delay: float = 0.0
    echo: bool = False
    hits: int = 0


@dataclass
class FakeKakaoCloud:
    """The fake's state; tests read and change it directly."""

    credential_id: str = "app-cred-id-0001"
    credential_secret: str = "s3cr3t-app-credential-value"
    token_ttl: float = 12 * 3600.0
    build_reads: int = 1
    delete_reads: int = 1
    fail_builds: int = 0
    tokens: dict[str, float] = field(default_factory=dict)
    instances: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: list[tuple[str, str, int]] = field(default_factory=list)
    injections: list[Injection] = field(default_factory=list)
    tokens_issued: int = 0

    def __post_init__(self) -> None:
        self._seq = itertools.count(1)
        self.clusters = {
            "demo": {
                "id": CLUSTER_ID, "name": "demo", "description": "", "api_version": "v1", "is_allocate_fip": False,
                "is_upgradable": False, "created_at": _iso(0), "failure_message": None,
                "control_plane_endpoint": {"host": "10.0.0.10", "port": 6443},
                "creator_info": {"id": "u1", "name": "admin"},
                "version": {"minor_version": "1.35", "patch_version": "1.35.2", "next_version": None,
                            "eol": "2027-02-28T00:00:00Z", "is_deprecated": False},
                "network": {"cni": "cilium", "pod_cidr": "172.16.0.0/16", "service_cidr": "172.17.0.0/16"},
                "status": {"phase": "Provisioned"},
                "vpc_info": {"id": "vpc-1", "subnets": [{"id": "subnet-a", "availability_zone": "kr-central-2-a", "cidr_block": "10.0.0.0/20"}]},
            }
        }
        self.versions = [
            {"minor_version": v, "patch_version": f"{v}.1", "next_version": None, "eol": "2027-01-01T00:00:00Z", "is_deprecated": False}
            for v in ("1.33", "1.34", "1.35")
        ]
        self.ke_images: list[dict[str, Any]] = []
        for v in ("1.34", "1.35"):
            for arch, gpu in (("x86_64", False), ("x86_64", True), ("aarch64", False)):
                self.ke_images.append({
                    "id": f"img-{v.replace('.', '')}-{arch}-{'gpu' if gpu else 'cpu'}",
                    "name": f"ubuntu-22.04-k8s-{v}-{arch}{'-gpu' if gpu else ''}", "architecture": arch, "is_gpu_type": gpu,
                    "instance_type": "vm", "k8s_version": f"{v}.1", "kernel_version": "5.15", "key_package": "containerd",
                    "os_distro": "ubuntu", "os_type": "linux", "os_version": "22.04",
                })
        self.subnets = {
            s["id"]: s for s in [
                {"id": "subnet-a", "name": "worker-a", "availability_zone": "kr-central-2-a", "vpc_id": "vpc-1", "provisioning_status": "ACTIVE"},
                {"id": "subnet-b", "name": "worker-b", "availability_zone": "kr-central-2-b", "vpc_id": "vpc-1", "provisioning_status": "ACTIVE"},
                {"id": "subnet-x", "name": "elsewhere", "availability_zone": "kr-central-2-a", "vpc_id": "vpc-2", "provisioning_status": "ACTIVE"},
            ]
        }
        self.security_groups = {
            "sg-worker": {"id": "sg-worker", "name": "kke-worker-sg", "description": "", "rules": []},
            "sg-extra": {"id": "sg-extra", "name": "extra-sg", "description": "", "rules": []},
        }
        self.keypairs = {"karpy-key": {"id": "kp-1", "name": "karpy-key", "fingerprint": "aa:bb", "type": "ssh"}}
        self.volume_types = [{"id": "vt-ssd", "name": "SSD", "description": "default"}]
        flavors: list[tuple[str, int, int, str, tuple[str, int] | None]] = [
            ("m2a.large", 2, 8192, "x86_64", None), ("m2a.xlarge", 4, 16384, "x86_64", None),
            ("m2a.2xlarge", 8, 32768, "x86_64", None), ("c2a.large", 2, 4096, "x86_64", None),
            ("c2a.xlarge", 4, 8192, "x86_64", None), ("r2a.large", 2, 16384, "x86_64", None),
            ("m2g.large", 2, 8192, "aarch64", None), ("p2a.xlarge", 8, 65536, "x86_64", ("a100", 1)),
            ("bm.i3", 64, 262144, "x86_64", None),
        ]
        self.flavors = {}
        for name, vcpus, mem, arch, accel in flavors:
            fid = str(uuid.uuid5(uuid.NAMESPACE_DNS, name))
            family, _, size = name.partition(".")
            self.flavors[fid] = {
                "id": fid, "name": name, "vcpus": vcpus, "memory_mb": mem, "architecture": arch, "root_gb": 0,
                "instance_family": family, "instance_size": size, "manufacturer": "AMD", "is_burstable": False,
                "instance_type": "bm" if name.startswith("bm") else ("gpu" if accel else "vm"),
                "hw_type": "GPU" if accel else None, "hw_name": accel[0] if accel else None, "hw_count": accel[1] if accel else 0,
                "availability_zone": ["kr-central-2-a", "kr-central-2-b", "kr-central-2-c"],
            }
        self.server: TestServer | None = None

    # ------------------------------------------------------------------ control
    def inject(self, status: int, *, method: str | None = None, path: str | None = None, times: int = 1,
               code: str | None = None, create_anyway: bool = False, delay: float = 0.0, echo: bool = False) -> Injection:
        """Make the next ``times`` calls matching ``method`` and ``path`` (a regex searched in the
        full path, prefix included) answer ``status``. With ``create_anyway`` the call is carried
        out first and its answer replaced by the error; with ``delay`` (seconds) the call is
        carried out and its own answer held that long (a read timeout for a shorter client
        timeout; ``status`` is then ignored). With ``echo`` the error's message quotes the request
        as some gateways do: every header (``X-Auth-Token`` included) and the body (an IAM request's
        application-credential secret included)."""
        inj = Injection(status, method, re.compile(path) if path else None, times,
                        code or {429: "TooManyRequests", 401: "Unauthorized"}.get(status, f"Error{status}"), create_anyway,
                        delay, echo)
        self.injections.append(inj)
        return inj

    def expire_tokens(self) -> None:
        self.tokens = {t: 0.0 for t in self.tokens}

    def add_instance(self, **fields: Any) -> dict[str, Any]:
        """Put a VM straight into the inventory (e.g. a foreign or KE one)."""
        iid = fields.pop("id", None) or str(uuid.uuid4())
        flavor = next(iter(self.flavors.values()))
        inst = {
            "id": iid, "name": fields.pop("name", f"vm-{iid[:8]}"), "description": fields.pop("description", ""),
            "flavor": dict(flavor), "image": {"id": "img-135-x86_64-cpu"}, "status": "active", "vm_state": "active",
            "task_state": None, "power_state": "RUNNING", "availability_zone": "kr-central-2-a", "is_k8se": False,
            "addresses": [{"private_ip": "10.0.0.99"}], "security_groups": [], "created_at": _iso(time.time()),
            "_reads": 0, "_created_seq": next(self._seq),
        }
        inst.update(fields)
        self.instances[iid] = inst
        return inst

    def endpoints(self) -> dict[str, str]:
        assert self.server is not None
        base = str(self.server.make_url("")).rstrip("/")
        return {"iam": f"{base}/iam", "bcs": f"{base}/bcs", "vpc": f"{base}/vpc", "network": f"{base}/network",
                "image": f"{base}/image", "volume": f"{base}/volume", "kubernetes_engine": f"{base}/ke"}

    async def start(self) -> None:
        app = web.Application(client_max_size=1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self.server = TestServer(app, host="127.0.0.1")
        await self.server.start_server()

    async def close(self) -> None:
        if self.server is not None:
            await self.server.close()

    def live(self) -> list[dict[str, Any]]:
        """Instances that still exist (deleting ones included), public fields only."""
        return [self._public(i) for i in self.instances.values()]

    # ------------------------------------------------------------------ plumbing
    @staticmethod
    def _public(inst: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in inst.items() if not k.startswith("_")}

    def _injected(self, method: str, path: str) -> Injection | None:
        for inj in self.injections:
            if inj.hits >= inj.times:
                continue
            if inj.method and inj.method != method:
                continue
            if inj.path and not inj.path.search(path):
                continue
            inj.hits += 1
            return inj
        return None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        method = request.method
        inj = self._injected(method, path)
        if inj is not None and inj.echo:
            self.calls.append((method, path, inj.status))
            return _err(inj.status, inj.code, await self._echo(request))
        if inj is not None and not inj.create_anyway and not inj.delay:
            self.calls.append((method, path, inj.status))
            return _err(inj.status, inj.code, f"injected {inj.status}")
        resp = await self._dispatch(request, method, path)
        if inj is not None and inj.delay:  # the work happened; the answer comes too late
            self.calls.append((method, path, resp.status))
            await asyncio.sleep(inj.delay)
            return resp
        if inj is not None:  # create_anyway: the work happened, the answer is an error
            resp = _err(inj.status, inj.code, f"injected {inj.status} after the work was done")
        self.calls.append((method, path, resp.status))
        return resp

    @staticmethod
    async def _echo(request: web.Request) -> str:
        """The request as an error message quoting it: ``headers: Name: value; ... body: <text>``."""
        headers = "; ".join(f"{k}: {v}" for k, v in request.headers.items())
        body = (await request.read()).decode(errors="replace")
        return f"rejected {request.method} {request.path_qs} headers: {headers} body: {body}"

    def _authorised(self, request: web.Request) -> bool:
        token = request.headers.get("X-Auth-Token")
        if not token:
            return False
        return self.tokens.get(token, 0.0) > time.time()

    async def _dispatch(self, request: web.Request, method: str, path: str) -> web.StreamResponse:
        if path == "/iam/identity/v3/auth/tokens" and method == "POST":
            return await self._issue(request)
        if not self._authorised(request):
            return _err(401, "Unauthorized", "The request you have made requires authentication.")
        service, _, rest = path.lstrip("/").partition("/")
        rest = "/" + rest
        handler = getattr(self, f"_{service}", None)
        if handler is None:
            return _err(404, "NotFound", f"no service {service}")
        return await handler(request, method, rest)

    async def _json(self, request: web.Request) -> Any:
        if request.content_type != "application/json":
            raise web.HTTPUnsupportedMediaType(text="Content-Type must be application/json")
        try:
            return await request.json()
        except json.JSONDecodeError:
            return None

    def _page(self, request: web.Request, key: str, items: list[dict[str, Any]]) -> web.Response:
        q = request.query
        name = q.get("name")
        if name:
            items = [i for i in items if name in str(i.get("name", ""))]
        for k in ("id", "availability_zone", "status", "is_k8se", "vpc_id"):
            if k in q:
                items = [i for i in items if str(i.get(k)).lower() == q[k].lower()]
        limit = int(q.get("limit", 20))
        offset = int(q.get("offset", 0))
        page = items[offset : offset + limit]
        return web.json_response({key: [self._public(i) for i in page], "pagination": {"total": len(items), "offset": offset, "limit": limit}})

    # ------------------------------------------------------------------ IAM
    async def _issue(self, request: web.Request) -> web.Response:
        if request.content_type != "application/json":
            return web.json_response({"error": {"code": 400, "message": "Content-Type must be application/json", "title": "Bad Request"}}, status=400)
        body = await request.json()
        ident = ((body or {}).get("auth") or {}).get("identity") or {}
        cred = ident.get("application_credential") or {}
        if ident.get("methods") != ["application_credential"] or cred.get("id") != self.credential_id or cred.get("secret") != self.credential_secret:
            return web.json_response({"error": {"code": 401, "message": "The request you have made requires authentication.", "title": "Unauthorized"}}, status=401)
        token = "gAAAA" + uuid.uuid4().hex
        expires = time.time() + self.token_ttl
        self.tokens[token] = expires
        self.tokens_issued += 1
        body = {"token": {"expires_at": _iso(expires), "issued_at": _iso(time.time()), "methods": ["application_credential"],
                          "project": {"id": "proj-1", "name": "demo", "domain": {"id": "d1", "name": "kakaoenterprise"}},
                          "application_credential": {"id": self.credential_id, "name": "karpy", "restricted": True}}}
        return web.json_response(body, status=201, headers={"X-Subject-Token": token})

    # ------------------------------------------------------------------ BCS
    def _tick(self, inst: dict[str, Any]) -> bool:
        """Advance the lifecycle on a read; False when the instance is gone."""
        inst["_reads"] += 1
        if inst["status"] == "building" and inst["_reads"] >= self.build_reads:
            if inst.get("_fail"):
                inst.update(status="error", vm_state="error", task_state=None, power_state="NOSTATE")
            else:
                inst.update(status="active", vm_state="active", task_state=None, power_state="RUNNING")
        elif inst["status"] == "deleting" and inst["_reads"] >= self.delete_reads:
            del self.instances[inst["id"]]
            return False
        return True

    async def _bcs(self, request: web.Request, method: str, rest: str) -> web.StreamResponse:
        m = re.fullmatch(r"/api/v1/instances/([^/]+)", rest)
        if rest == "/api/v1/instances" and method == "GET":
            live = [i for i in sorted(self.instances.values(), key=lambda i: -i["_created_seq"]) if self._tick(i)]
            return self._page(request, "instances", live)
        if rest == "/api/v1/instances" and method == "POST":
            return await self._create(request)
        if m:
            inst = self.instances.get(m.group(1))
            if inst is None:
                return _err(404, "NotFound", f"instance {m.group(1)} not found")
            if method == "GET":
                if not self._tick(inst):
                    return _err(404, "NotFound", f"instance {m.group(1)} not found")
                return web.json_response({"instance": self._public(inst)})
            if method == "PUT":
                body = (await self._json(request) or {}).get("instance") or {}
                if inst["status"] == "deleting":
                    return _err(409, "Conflict", "instance is being deleted")
                if "description" in body:
                    problem = self._check_description(body["description"])
                    if problem:
                        return _err(400, "BadRequest", problem)
                    inst["description"] = body["description"] or ""
                if body.get("name") is not None:
                    inst["name"] = body["name"]
                return web.json_response({"instance": {**self._public(inst), "metadata": {}, "terminated_at": None}})
            if method == "DELETE":
                if inst["status"] != "deleting":
                    inst.update(status="deleting", task_state="deleting", _reads=0)
                return web.Response(status=204)
        if rest == "/api/v1/flavors" and method == "GET":
            return self._page(request, "flavors", sorted(self.flavors.values(), key=lambda f: f["name"]))
        m = re.fullmatch(r"/api/v1/flavors/([^/]+)", rest)
        if m and method == "GET":
            fl = self.flavors.get(m.group(1))
            return web.json_response({"flavor": fl}) if fl else _err(404, "NotFound", "flavor not found")
        if rest == "/api/v1/keypairs" and method == "GET":
            return self._page(request, "keypairs", list(self.keypairs.values()))
        m = re.fullmatch(r"/api/v1/keypairs/([^/]+)", rest)
        if m and method == "GET":
            kp = self.keypairs.get(m.group(1))
            return web.json_response({"keypair": kp}) if kp else _err(404, "NotFound", "key pair not found")
        return _err(404, "NotFound", f"no route {method} {rest}")

    @staticmethod
    def _check_description(desc: Any) -> str | None:
        if desc is None:
            return None
        if not isinstance(desc, str) or len(desc) > 100:
            return "description must be at most 100 characters"
        if not DESCRIPTION.match(desc):
            return "description contains characters that are not allowed"
        return None

    async def _create(self, request: web.Request) -> web.Response:
        body = (await self._json(request) or {}).get("instance")
        if not isinstance(body, dict):
            return _err(400, "BadRequest", "body must be {\"instance\": {...}}")
        name = body.get("name") or ""
        problems = []
        if not (4 <= len(name) <= 63) or not NAME.match(name) or any(s in name for s in ("--", "__", "-_", "_-")):
            problems.append(f"invalid name {name!r}")
        d = self._check_description(body.get("description"))
        if d:
            problems.append(d)
        image_ids = {i["id"] for i in self.ke_images}
        if body.get("image_id") not in image_ids:
            problems.append("unknown image_id")
        flavor_id = body.get("flavor_id")
        flavor = self.flavors.get(flavor_id) if isinstance(flavor_id, str) else None
        if flavor is None:
            problems.append("unknown flavor_id")
        subnets = body.get("subnets") or []
        if not subnets or any(s.get("id") not in self.subnets for s in subnets):
            problems.append("subnets must name existing subnets")
        sg_names = {g["name"] for g in self.security_groups.values()}
        sgs = body.get("security_groups") or []
        if not sgs or any(g.get("name") not in sg_names for g in sgs):
            problems.append("security_groups must name existing security groups by name")
        if body.get("key_name") and body["key_name"] not in self.keypairs:
            problems.append("unknown key_name")
        vols = body.get("volumes") or []
        if not vols or not all(1 <= int(v.get("size", 0)) <= 16384 for v in vols):
            problems.append("volumes: size must be 1..16384")
        ud = body.get("user_data")
        if ud is not None:
            try:
                base64.b64decode(ud, validate=True)
            except (binascii.Error, ValueError):
                problems.append("user_data must be base64")
            if len(ud) > 16 * 1024:
                problems.append("user_data exceeds 16 KB")
        if problems:
            return _err(400, "BadRequest", "; ".join(problems))
        assert flavor is not None
        zone = body.get("availability_zone") or self.subnets[subnets[0]["id"]]["availability_zone"]
        iid = str(uuid.uuid4())
        self.instances[iid] = {
            "id": iid, "name": name, "description": body.get("description") or "", "flavor": dict(flavor),
            "image": {"id": body["image_id"]}, "status": "building", "vm_state": "building", "task_state": "spawning",
            "power_state": "NOSTATE", "availability_zone": zone, "is_k8se": False, "key_name": body.get("key_name"),
            "security_groups": [{"name": g["name"]} for g in sgs], "addresses": [{"private_ip": "10.0.1.1"}],
            "attached_volumes": [{"size": vols[0]["size"], "is_root": True,
                                  "is_delete_on_termination": vols[0].get("is_delete_on_termination", True)}],
            "created_at": _iso(time.time()), "_reads": 0, "_created_seq": next(self._seq),
            "_user_data": ud, "_subnets": [s["id"] for s in subnets], "_fail": self.fail_builds > 0,
        }
        if self.fail_builds > 0:
            self.fail_builds -= 1
        return web.json_response({"instance": {"id": iid, "security_groups": [{"name": g["name"]} for g in sgs],
                                               "admin_pass": None, "disk_config": "AUTO"}}, status=202)

    # ------------------------------------------------------------------ VPC, Network, Volume, KE
    async def _vpc(self, request: web.Request, method: str, rest: str) -> web.StreamResponse:
        if rest == "/api/v1/subnets":
            return self._page(request, "subnets", list(self.subnets.values()))
        m = re.fullmatch(r"/api/v1/subnets/([^/]+)", rest)
        if m and m.group(1) in self.subnets:
            return web.json_response({"subnet": self.subnets[m.group(1)]})
        return _err(404, "NotFound", "subnet not found")

    async def _network(self, request: web.Request, method: str, rest: str) -> web.StreamResponse:
        if rest == "/api/v1/security-groups":
            return self._page(request, "security_groups", list(self.security_groups.values()))
        m = re.fullmatch(r"/api/v1/security-groups/([^/]+)", rest)
        if m and m.group(1) in self.security_groups:
            return web.json_response({"security_group": self.security_groups[m.group(1)]})
        return _err(404, "NotFound", "security group not found")

    async def _volume(self, request: web.Request, method: str, rest: str) -> web.StreamResponse:
        if rest == "/api/v1/volumes/types":
            return web.json_response({"volume_types": self.volume_types})
        return _err(404, "NotFound", "not found")

    async def _ke(self, request: web.Request, method: str, rest: str) -> web.StreamResponse:
        if rest == "/api/v1/versions":
            return web.json_response({"versions": self.versions})
        if rest == "/api/v1/images":
            images = self.ke_images
            v = request.query.get("k8s_version")
            if v:
                images = [i for i in images if i["k8s_version"] == v or i["k8s_version"].startswith(v + ".")]
            return web.json_response({"images": images})
        if rest == "/api/v1/clusters":
            return web.json_response({"clusters": list(self.clusters.values())})
        m = re.fullmatch(r"/api/v1/clusters/([^/]+)", rest)
        if m:
            c = self.clusters.get(m.group(1))
            return web.json_response({"cluster": c}) if c else _err(404, "NotFound", f"cluster {m.group(1)} not found")
        return _err(404, "NotFound", "not found")
