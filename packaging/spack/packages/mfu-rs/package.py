# Spack recipe for mfu-rs. Use it from this repository's Spack repo:
#   spack repo add packaging/spack && spack install mfu-rs          (MPI from Spack's provider)
#   spack install mfu-rs ~mpi                                         (one process, thread ranks)
# It builds with the same command as the project's CI and `cargo xtask dist`: both binaries,
# the mpiFileUtils-named links (dcp, dsync, ...), man pages and shell completions.

from spack.package import *


class MfuRs(Package):
    """Parallel data-management tools for HPC file systems (copy, sync, archive, remove, compare,
    find...), the Rust successor of mpiFileUtils with the same command lines and file formats."""

    homepage = "https://github.com/mfu-rs/mfu-rs"
    git = "https://github.com/mfu-rs/mfu-rs.git"

    maintainers("mfu-rs")
    license("BSD-3-Clause")

    version("main", branch="main")

    variant(
        "mpi",
        default=True,
        description="Link MPI (mfu-rs-mpi) to run as many processes under mpirun/srun; without "
        "it mfu-rs runs as one process whose ranks are threads",
    )
    # Lustre needs no variant: mfu-rs sets and reads layouts through the Lustre ioctls itself
    # (no liblustreapi), so the same build works on Lustre and on every other file system.

    depends_on("rust@1.85:", type="build")
    depends_on("mpi", when="+mpi")
    # rsmpi generates its MPI bindings with bindgen, which loads libclang.
    depends_on("llvm+clang", type="build", when="+mpi")

    def setup_build_environment(self, env):
        if self.spec.satisfies("+mpi"):
            # rsmpi finds the MPI library through its compiler wrapper.
            env.set("MPICC", self.spec["mpi"].mpicc)
            env.set("LIBCLANG_PATH", self.spec["llvm"].prefix.lib)
        env.set("MFU_RS_COMMIT", str(self.spec.version))

    def install(self, spec, prefix):
        cargo = which("cargo")
        args = ["xtask", "dist", "--prefix", prefix]
        if spec.satisfies("~mpi"):
            args.append("--no-mpi")
        cargo(*args)

    @run_after("install")
    @on_package_attributes(run_tests=True)
    def check_install(self):
        mfu = Executable(self.prefix.bin.join("mfu-rs"))
        mfu("--version")
        Executable(self.prefix.bin.join("dwalk"))("--version")
