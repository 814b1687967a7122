//! The pod sandbox image: a tiny static "pause" program that holds a pod's
//! network (and IPC) namespace, as the kubelet's `pause` container does.
//!
//! No registry is reachable from many nodes, so the agent builds the image
//! itself on first use: a rootfs tar holding one file, `/pause`, imported
//! with `POST /images/create?fromSrc=-` (what `docker import` does). The
//! program is a hand-assembled static ELF of a few hundred bytes, written
//! out below with its assembly; the image tag carries a hash of it
//! (`drover/pause:<hash>`), so a changed program gets a new image.
//!
//! What the program does: block SIGINT and SIGTERM, wait for one of them
//! with `rt_sigtimedwait` (a blocked signal is queued even for PID 1, which
//! ignores signals it has no handler for), then `exit_group(0)`. It needs no
//! signal handler, no libc and no stack beyond the 8 bytes of its signal
//! set.

use crate::runtime::fnv1a;

/// Repository of the sandbox image.
pub(crate) const REPO: &str = "drover/pause";

/// The program's code for x86_64 (Linux syscall numbers 14, 128, 231):
///
/// ```text
/// _start: push  0x4002          ; sigset {SIGINT(2), SIGTERM(15)} on the stack
///         mov   rsi, rsp        ; set
///         xor   edi, edi        ; how = SIG_BLOCK
///         xor   edx, edx        ; oldset = NULL
///         mov   r10d, 8         ; sigsetsize
///         mov   eax, 14         ; rt_sigprocmask
///         syscall
/// wait:   mov   rdi, rsp        ; set
///         xor   esi, esi        ; info = NULL
///         xor   edx, edx        ; timeout = NULL (forever)
///         mov   r10d, 8         ; sigsetsize
///         mov   eax, 128        ; rt_sigtimedwait
///         syscall
///         test  eax, eax        ; the signal number, or -EINTR
///         jle   wait
///         xor   edi, edi        ; status 0
///         mov   eax, 231        ; exit_group
///         syscall
/// ```
const CODE_X86_64: &[u8] = &[
    0x68, 0x02, 0x40, 0x00, 0x00, // push 0x4002
    0x48, 0x89, 0xe6, // mov rsi, rsp
    0x31, 0xff, // xor edi, edi
    0x31, 0xd2, // xor edx, edx
    0x41, 0xba, 0x08, 0x00, 0x00, 0x00, // mov r10d, 8
    0xb8, 0x0e, 0x00, 0x00, 0x00, // mov eax, 14
    0x0f, 0x05, // syscall
    0x48, 0x89, 0xe7, // wait: mov rdi, rsp
    0x31, 0xf6, // xor esi, esi
    0x31, 0xd2, // xor edx, edx
    0x41, 0xba, 0x08, 0x00, 0x00, 0x00, // mov r10d, 8
    0xb8, 0x80, 0x00, 0x00, 0x00, // mov eax, 128
    0x0f, 0x05, // syscall
    0x85, 0xc0, // test eax, eax
    0x7e, 0xe8, // jle wait (-24)
    0x31, 0xff, // xor edi, edi
    0xb8, 0xe7, 0x00, 0x00, 0x00, // mov eax, 231
    0x0f, 0x05, // syscall
];

/// The same program for aarch64 (syscall numbers 135, 137, 94), as
/// little-endian instruction words:
///
/// ```text
/// _start: mov  x9, #0x4002       ; sigset {SIGINT, SIGTERM}
///         str  x9, [sp, #-16]!   ; on the stack
///         mov  x0, #0            ; SIG_BLOCK
///         mov  x1, sp            ; set
///         mov  x2, #0            ; oldset
///         mov  x3, #8            ; sigsetsize
///         mov  x8, #135          ; rt_sigprocmask
///         svc  #0
/// wait:   mov  x0, sp            ; set
///         mov  x1, #0            ; info
///         mov  x2, #0            ; timeout: forever
///         mov  x3, #8            ; sigsetsize
///         mov  x8, #137          ; rt_sigtimedwait
///         svc  #0
///         cmp  x0, #0            ; the signal number, or -EINTR
///         b.le wait
///         mov  x0, #0            ; status 0
///         mov  x8, #94           ; exit_group
///         svc  #0
/// ```
const CODE_AARCH64: &[u32] = &[
    0xd288_0049, // mov x9, #0x4002
    0xf81f_0fe9, // str x9, [sp, #-16]!
    0xd280_0000, // mov x0, #0
    0x9100_03e1, // mov x1, sp
    0xd280_0002, // mov x2, #0
    0xd280_0103, // mov x3, #8
    0xd280_10e8, // mov x8, #135
    0xd400_0001, // svc #0
    0x9100_03e0, // wait: mov x0, sp
    0xd280_0001, // mov x1, #0
    0xd280_0002, // mov x2, #0
    0xd280_0103, // mov x3, #8
    0xd280_1128, // mov x8, #137
    0xd400_0001, // svc #0
    0xf100_001f, // cmp x0, #0
    0x54ff_ff2d, // b.le wait
    0xd280_0000, // mov x0, #0
    0xd280_0bc8, // mov x8, #94
    0xd400_0001, // svc #0
];

/// Where the one loadable segment (the whole file) is mapped.
const BASE: u64 = 0x40_0000;
/// Sizes of the ELF64 file header and of one program header.
const EHDR: usize = 64;
const PHDR: usize = 56;

/// A static ELF64 executable of `code` for `machine` (EM_X86_64 = 62,
/// EM_AARCH64 = 183): a file header, one `PT_LOAD` program header (read +
/// execute, the whole file at [`BASE`]), then the code, which is the entry
/// point. No sections.
fn elf(machine: u16, align: u64, code: &[u8]) -> Vec<u8> {
    let size = (EHDR + PHDR + code.len()) as u64;
    let entry = BASE + (EHDR + PHDR) as u64;
    let mut f = Vec::with_capacity(size as usize);
    // e_ident: magic, ELFCLASS64, little-endian, version 1, System V ABI.
    f.extend_from_slice(&[0x7f, b'E', b'L', b'F', 2, 1, 1, 0]);
    f.extend_from_slice(&[0; 8]);
    f.extend_from_slice(&2u16.to_le_bytes()); // e_type: ET_EXEC
    f.extend_from_slice(&machine.to_le_bytes()); // e_machine
    f.extend_from_slice(&1u32.to_le_bytes()); // e_version
    f.extend_from_slice(&entry.to_le_bytes()); // e_entry
    f.extend_from_slice(&(EHDR as u64).to_le_bytes()); // e_phoff
    f.extend_from_slice(&0u64.to_le_bytes()); // e_shoff: no sections
    f.extend_from_slice(&0u32.to_le_bytes()); // e_flags
    f.extend_from_slice(&(EHDR as u16).to_le_bytes()); // e_ehsize
    f.extend_from_slice(&(PHDR as u16).to_le_bytes()); // e_phentsize
    f.extend_from_slice(&1u16.to_le_bytes()); // e_phnum
    f.extend_from_slice(&0u16.to_le_bytes()); // e_shentsize
    f.extend_from_slice(&0u16.to_le_bytes()); // e_shnum
    f.extend_from_slice(&0u16.to_le_bytes()); // e_shstrndx
    debug_assert_eq!(f.len(), EHDR);
    f.extend_from_slice(&1u32.to_le_bytes()); // p_type: PT_LOAD
    f.extend_from_slice(&5u32.to_le_bytes()); // p_flags: PF_R | PF_X
    f.extend_from_slice(&0u64.to_le_bytes()); // p_offset
    f.extend_from_slice(&BASE.to_le_bytes()); // p_vaddr
    f.extend_from_slice(&BASE.to_le_bytes()); // p_paddr
    f.extend_from_slice(&size.to_le_bytes()); // p_filesz
    f.extend_from_slice(&size.to_le_bytes()); // p_memsz
    f.extend_from_slice(&align.to_le_bytes()); // p_align
    debug_assert_eq!(f.len(), EHDR + PHDR);
    f.extend_from_slice(code);
    f
}

/// The pause program for an engine architecture as Docker names it
/// (`amd64`, `arm64`; Go's names), or `None` when there is none.
pub(crate) fn program(arch: &str) -> Option<Vec<u8>> {
    match arch {
        "amd64" | "x86_64" => Some(elf(62, 0x1000, CODE_X86_64)),
        "arm64" | "aarch64" => {
            let code: Vec<u8> = CODE_AARCH64.iter().flat_map(|w| w.to_le_bytes()).collect();
            Some(elf(183, 0x1_0000, &code))
        }
        _ => None,
    }
}

/// The image's name for this program: `drover/pause:<16 hex digits>`.
pub(crate) fn image_name(program: &[u8]) -> String {
    format!("{REPO}:{}", tag(program))
}

/// The tag part of [`image_name`].
pub(crate) fn tag(program: &[u8]) -> String {
    format!("{:016x}", fnv1a(program))
}

/// A ustar archive holding one regular file `name` (mode 0755, owned by
/// root) with `content`: a rootfs for `docker import`.
pub(crate) fn rootfs_tar(name: &str, content: &[u8]) -> Vec<u8> {
    let mut h = [0u8; 512];
    let put = |h: &mut [u8; 512], at: usize, bytes: &[u8]| {
        h[at..at + bytes.len()].copy_from_slice(bytes);
    };
    put(&mut h, 0, name.as_bytes()); // name (at most 100 bytes)
    put(&mut h, 100, b"0000755\0"); // mode
    put(&mut h, 108, b"0000000\0"); // uid
    put(&mut h, 116, b"0000000\0"); // gid
    put(&mut h, 124, format!("{:011o}\0", content.len()).as_bytes()); // size
    put(&mut h, 136, b"00000000000\0"); // mtime: the epoch (reproducible)
    put(&mut h, 148, b"        "); // checksum: spaces while summing
    h[156] = b'0'; // typeflag: regular file
    put(&mut h, 257, b"ustar\0"); // magic
    put(&mut h, 263, b"00"); // version
    put(&mut h, 265, b"root"); // uname
    put(&mut h, 297, b"root"); // gname
    let sum: u32 = h.iter().map(|b| u32::from(*b)).sum();
    put(&mut h, 148, format!("{sum:06o}\0 ").as_bytes());
    let mut tar = h.to_vec();
    tar.extend_from_slice(content);
    let pad = (512 - content.len() % 512) % 512;
    tar.extend(std::iter::repeat_n(0u8, pad));
    // Two zero blocks end the archive.
    tar.extend(std::iter::repeat_n(0u8, 1024));
    tar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_programs_are_small_static_elves() {
        for (arch, machine) in [("amd64", 62u16), ("arm64", 183)] {
            let p = program(arch).unwrap();
            assert!(p.len() < 256, "{arch}: {} bytes", p.len());
            assert_eq!(&p[..4], b"\x7fELF");
            assert_eq!(u16::from_le_bytes([p[18], p[19]]), machine);
            let entry = u64::from_le_bytes(p[24..32].try_into().unwrap());
            assert_eq!(entry, BASE + 120);
            let filesz = u64::from_le_bytes(p[EHDR + 32..EHDR + 40].try_into().unwrap());
            assert_eq!(filesz as usize, p.len());
        }
        assert!(program("s390x").is_none());
        let a = image_name(&program("amd64").unwrap());
        assert!(a.starts_with("drover/pause:") && a.len() == REPO.len() + 17);
        assert_ne!(a, image_name(&program("arm64").unwrap()));
    }

    #[test]
    fn the_tar_has_one_file_and_a_valid_checksum() {
        let t = rootfs_tar("pause", b"hello");
        assert_eq!(t.len(), 512 * 4);
        assert_eq!(&t[257..263], b"ustar\0");
        let mut h = t[..512].to_vec();
        let stored = u32::from_str_radix(std::str::from_utf8(&h[148..154]).unwrap(), 8).unwrap();
        h[148..156].copy_from_slice(b"        ");
        assert_eq!(stored, h.iter().map(|b| u32::from(*b)).sum::<u32>());
        assert_eq!(&t[512..517], b"hello");
        assert_eq!(&t[124..135], b"00000000005");
    }

    /// Runs the program of this machine and stops it with SIGTERM.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    #[test]
    fn the_x86_64_program_waits_for_sigterm_and_exits_0() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pause");
        std::fs::write(&path, program("amd64").unwrap()).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        /// Kills the program if the test fails half-way.
        struct Kill(std::process::Child);
        impl Drop for Kill {
            fn drop(&mut self) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
        let mut child = Kill(std::process::Command::new(&path).spawn().unwrap());
        // Wait until it sits in rt_sigtimedwait (syscall 128); a SIGTERM
        // before it blocked the signal would kill it the default way.
        let syscall = format!("/proc/{}/syscall", child.0.id());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let text = std::fs::read_to_string(&syscall).unwrap_or_default();
            if text.starts_with("128 ") {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "never waits: {text}");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(
            child.0.try_wait().unwrap().is_none(),
            "pause exited by itself"
        );
        let status = std::process::Command::new("kill")
            .args(["-TERM", &child.0.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let code = child.0.wait().unwrap();
        assert_eq!(code.code(), Some(0), "{code:?}");
    }
}
