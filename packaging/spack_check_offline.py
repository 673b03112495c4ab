#!/usr/bin/env python3
"""Load hostbench's Spack package against a minimal stand-in for Spack's package API.

For machines without Spack (the CI machine reaches no source of Spack): it proves that
package.py is valid Python, that it uses only the directives and build-system classes the
stand-in knows (those of Spack's own CargoPackage packages), and that what it declares agrees
with the workspace: the version, the Rust the workspace requires, and the crate the builder
installs. It does not concretize or build; `spack info hostbench` with a real Spack does the
former (scripts/test-package, where SPACK_ROOT names one).

Usage: spack_check_offline.py PACKAGE_PY WORKSPACE_VERSION RUST_VERSION
"""

import importlib.util
import os
import sys
import tempfile
import types

declared = {"versions": [], "depends_on": [], "licenses": []}


def stub_modules():
    package = types.ModuleType("spack.package")
    package.version = lambda v, **kw: declared["versions"].append(v)
    package.depends_on = lambda spec, **kw: declared["depends_on"].append((spec, kw))
    package.license = lambda expr, **kw: declared["licenses"].append(expr)
    package.run_after = lambda *phases, **kw: (lambda fn: fn)
    package.join_path = os.path.join
    package.Executable = lambda path: (lambda *args, **kw: None)
    package.__all__ = ["version", "depends_on", "license", "run_after", "join_path", "Executable"]

    cargo = types.ModuleType("spack.build_systems.cargo")

    class CargoPackage:
        pass

    class CargoBuilder:
        def __init__(self, pkg):
            self.pkg = pkg

    cargo.CargoPackage = CargoPackage
    cargo.CargoBuilder = CargoBuilder
    build_systems = types.ModuleType("spack.build_systems")
    build_systems.cargo = cargo
    spack = types.ModuleType("spack")
    spack.package = package
    spack.build_systems = build_systems
    return {
        "spack": spack,
        "spack.package": package,
        "spack.build_systems": build_systems,
        "spack.build_systems.cargo": cargo,
    }


def main():
    path, workspace_version, rust_version = sys.argv[1:4]
    sys.modules.update(stub_modules())
    spec = importlib.util.spec_from_file_location("hostbench_spack_package", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    pkg_cls = module.Hostbench
    problems = []
    if workspace_version not in declared["versions"]:
        problems.append(f"version {workspace_version} (Cargo.toml) not declared: {declared['versions']}")
    rust = [s for s, kw in declared["depends_on"] if s.startswith("rust")]
    if rust != [f"rust@{rust_version}:"]:
        problems.append(f"expected depends_on('rust@{rust_version}:') (rust-version), got {rust}")
    if declared["licenses"] != ["MIT OR Apache-2.0"]:
        problems.append(f"licence {declared['licenses']} is not the workspace's MIT OR Apache-2.0")
    if f"hostbench-{workspace_version}.tar.gz" not in pkg_cls.url:
        problems.append(f"url {pkg_cls.url} does not name scripts/package's source tarball")

    # The builder must point cargo at the binary crate and keep Cargo.lock's versions.
    stage = types.SimpleNamespace(source_path=tempfile.gettempdir())
    builder = module.CargoBuilder(types.SimpleNamespace(stage=stage))
    crate = builder.build_directory
    if os.path.relpath(crate, stage.source_path) != os.path.join("crates", "hostbench"):
        problems.append(f"build_directory {crate} is not crates/hostbench")
    if "--locked" not in builder.build_args:
        problems.append("build_args lack --locked")

    if problems:
        print("package.py: " + "; ".join(problems), file=sys.stderr)
        sys.exit(1)
    print(f"package.py loads: Hostbench {declared['versions']}, depends on {rust[0]}, builds crates/hostbench --locked")


if __name__ == "__main__":
    main()
