"""Pure parts of the lab build: version parsing, cache keys, apt sources."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tankbench.lab import build, chroot, recipe, steps

V = build.Versions(
    suite="bookworm-backports",
    kernel_abi="6.12.95+deb12-amd64",
    kernel_version="6.12.95-1~bpo12+1",
    zfs_version="2.3.2-2~bpo12+2",
    mirror="http://deb.debian.org/debian",
    security_mirror="http://deb.debian.org/debian-security",
)


def test_parse_kernel_abi_from_metapackage_depends() -> None:
    assert build.parse_kernel_abi("linux-image-6.12.95+deb12-amd64 (= 6.12.95-1~bpo12+1)") == "6.12.95+deb12-amd64"
    assert build.parse_kernel_abi("linux-image-6.1.0-50-amd64 (= 6.1.176-1)") == "6.1.0-50-amd64"
    with pytest.raises(ValueError):
        build.parse_kernel_abi("libc6 (>= 2.36)")


def test_image_key_changes_with_versions_packages_and_files() -> None:
    k = build.image_key(V, "files1")
    assert k == build.image_key(V, "files1")  # stable
    assert k != build.image_key(replace(V, zfs_version="2.3.3-1~bpo12+1"), "files1")
    assert k != build.image_key(replace(V, kernel_abi="6.12.99+deb12-amd64"), "files1")
    assert k != build.image_key(V, "files2")
    assert k != build.image_key(V, "files1", packages=("fio",))


def test_image_key_changes_with_the_tools_recipe(monkeypatch: pytest.MonkeyPatch) -> None:
    """The image embeds the tools step's static fio: rebuilding fio differently must rebuild the image."""
    k = build.image_key(V, "files1")
    monkeypatch.setattr(recipe, "TOOLS_RECIPE", recipe.TOOLS_RECIPE + "-next")
    assert k != build.image_key(V, "files1")


def test_guest_and_modules_keys_ignore_guest_files() -> None:
    assert build.guest_key(V) == build.guest_key(V)
    assert build.guest_key(V) != build.guest_key(replace(V, zfs_version="x"))
    assert build.modules_key(V) == "6.12.95_deb12-amd64-zfs-2.3.2-2_bpo12_2"


def test_guest_files_hash_covers_lab_init() -> None:
    h = build.guest_files_hash()
    assert len(h) == 16 and h == build.guest_files_hash()


def test_sources_list_has_contrib_and_backports() -> None:
    text = build.sources_list("http://m/debian", "http://m/debian-security")
    assert "deb http://m/debian bookworm main contrib" in text
    assert "deb http://m/debian bookworm-backports main contrib" in text
    assert "deb http://m/debian-security bookworm-security main contrib" in text


def test_host_mirrors_reads_deb822_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TANKBENCH_MIRROR", raising=False)
    (tmp_path / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm\n\n"
        "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n"
    )
    assert build.host_mirrors(str(tmp_path)) == (
        "http://mirror.example/debian",
        "http://mirror.example/debian-security",
    )


def test_cache_dir_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert build.cache_dir() == tmp_path / "tankbench" / "lab"


def test_remove_tree_refuses_a_tree_with_mounts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    victim = tmp_path / "chroot"
    (victim / "dev").mkdir(parents=True)
    monkeypatch.setattr(chroot, "unmount_all", lambda root: None)
    monkeypatch.setattr(chroot, "_mounts_under", lambda root: [str(victim / "dev")])
    with pytest.raises(Exception, match="refusing to delete"):
        build.remove_tree(victim)
    assert victim.exists()


def test_sshd_config_allows_key_root_login_only() -> None:
    out = steps._sshd_config("#PermitRootLogin prohibit-password\nX 1\n")
    assert "PermitRootLogin prohibit-password" in out and "PasswordAuthentication no" in out
    assert "UseDNS no" in out


def test_ensure_image_uses_the_cache_without_network(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json
    from dataclasses import asdict

    (tmp_path / "versions.json").write_text(json.dumps(asdict(V)))
    key = build.image_key(V, build.guest_files_hash())
    img = tmp_path / f"image-{key}"
    img.mkdir()
    (img / "manifest.json").write_text(json.dumps({"key": key, "versions": asdict(V), "host_key": "ssh-ed25519 A"}))

    def no_build(*a: object, **k: object) -> None:
        raise AssertionError("must not build or resolve")

    monkeypatch.setattr(build, "build", no_build)
    got = build.ensure_image(cache=tmp_path)
    assert got.key == key and got.rootfs == img / "rootfs.img" and got.versions == V
    # a change to the guest files (lab-init) means another key: the image must be rebuilt
    monkeypatch.setattr(build, "guest_files_hash", lambda: "changed")
    with pytest.raises(AssertionError, match="must not build"):
        build.ensure_image(cache=tmp_path)


def test_build_falls_back_to_bookworm_when_backports_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = replace(V, suite="bookworm", kernel_abi="6.1.0-50-amd64", zfs_version="2.1.11-1+deb12u1")
    asked: list[tuple[str, ...]] = []

    def resolve(
        cache: Path,
        progress: object,
        *,
        offline_ok: bool = True,
        suites: tuple[str, ...] = (build.BACKPORTS, build.SUITE),
    ) -> build.Versions:
        asked.append(tuple(suites))
        return V if build.BACKPORTS in suites else old

    built: list[str] = []

    def build_versions(cache: Path, versions: build.Versions, steps: object) -> str:
        built.append(versions.suite)
        if versions.suite == build.BACKPORTS:
            raise build.LabBuildError("builder-zfs-dkms", tmp_path / "builder.log", "dkms: build failed")
        return "image"

    monkeypatch.setattr(build, "resolve_versions", resolve)
    monkeypatch.setattr(build, "_build_versions", build_versions)
    monkeypatch.setattr(build, "_check_tools", lambda: None)
    lines: list[str] = []
    assert build.build(lines.append, cache=tmp_path) == "image"  # type: ignore[comparison-overlap]
    assert built == ["bookworm-backports", "bookworm"]
    assert asked[-1] == ("bookworm",)
    assert any("falling back to bookworm" in line for line in lines)


def test_failed_step_names_itself_its_log_and_the_tail(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    err = build.LabBuildError("guest-apt", log)
    assert "lab build step 'guest-apt' failed" in str(err) and str(log) in str(err)
    assert "line 99" in str(err) and "line 10\n" not in str(err)


def test_a_build_without_root_is_refused_for_root_not_for_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    # as a user, the tools in /usr/sbin are not on PATH: the refusal named them as missing and sent the user to
    # install them; root is what is missing
    from tankbench.errors import UserError
    from tankbench.lab.build import _check_tools

    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    with pytest.raises(UserError) as e:
        _check_tools(euid=65534)
    assert "needs root" in str(e.value) and "debootstrap, mke2fs" not in str(e.value)
    assert "per user" in str(e.value)
    _check_tools(euid=0)  # root with a user's PATH: the tools are found in the sbin directories


def test_a_build_without_root_and_without_an_image_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """QA F4: as a user, `lab build` fetched 27 MB of apt indexes into ~/.cache before saying it needs root."""
    from tankbench.errors import UserError

    def no_network(*a: object, **kw: object) -> None:
        raise AssertionError("resolve_versions called before the root check")

    monkeypatch.setattr(build.os, "geteuid", lambda: 65534)
    monkeypatch.setattr(build, "resolve_versions", no_network)
    cache = tmp_path / "home/.cache/tankbench/lab"
    with pytest.raises(UserError, match="needs root"):
        build.build(lambda s: None, cache=cache)
    assert not (tmp_path / "home").exists()
