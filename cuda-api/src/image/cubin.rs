//! The ELF layer of a cubin: its header, program headers, section table,
//! symbol tables, notes and `.nv.info` records, each checked against the
//! image's length.

use super::error::Result;
use super::region::Region;

/// `EM_CUDA`.
pub(super) const EM_CUDA: u16 = 190;

pub(super) const SHT_NULL: u32 = 0;
pub(super) const SHT_SYMTAB: u32 = 2;
pub(super) const SHT_STRTAB: u32 = 3;
pub(super) const SHT_RELA: u32 = 4;
pub(super) const SHT_NOTE: u32 = 7;
pub(super) const SHT_NOBITS: u32 = 8;
pub(super) const SHT_REL: u32 = 9;
pub(super) const SHT_DYNSYM: u32 = 11;
/// `SHT_CUDA_INFO` (`SHT_LOPROC`): NVIDIA's `.nv.info` attribute records.
pub(super) const SHT_CUDA_INFO: u32 = 0x7000_0000;
/// The symbol table of the `.nv.merc.*` sections that CUDA 13.x compilers
/// write into sm_100 and newer cubins (`.nv.merc.symtab`).
pub(super) const SHT_CUDA_MERC_SYMTAB: u32 = 0x7000_0085;
/// A `.nv.capmerc.text.<fn>` section: its sh_info is the function's symbol
/// in the merc symbol table that sh_link names.
pub(super) const SHT_CUDA_CAPMERC_TEXT: u32 = 0x7000_0016;
pub(super) const SHN_LORESERVE: u16 = 0xff00;
pub(super) const STT_FUNC: u8 = 2;

#[derive(Clone, Copy)]
pub(super) struct Section {
    pub(super) index: usize,
    pub(super) header: u64,
    pub(super) name: u32,
    pub(super) kind: u32,
    pub(super) offset: u64,
    pub(super) size: u64,
    pub(super) link: u32,
    pub(super) info: u32,
    pub(super) entsize: u64,
}

/// Checks an ELF cubin occupying all of `r`, pass by pass; each pass
/// checks what the driver would otherwise follow blindly, and the first
/// problem is the error:
///
/// 1. [`elf_header`]: identification, machine and header size;
/// 2. [`program_headers`]: every segment lies inside the image;
/// 3. [`section_table`]: every section header (offset, size, alignment,
///    link, entry size; header 0 all zero);
/// 4. [`Sections::string_tables`]: the section-name table, NUL-terminated
///    string tables and every section name;
/// 5. [`Sections::symbol_tables`]: symbol names, section indices and
///    function extents;
/// 6. [`Sections::relocations`]: symbols and offsets of relocations;
/// 7. [`Sections::section_infos`]: every `sh_info` the driver reads as an
///    index or a count;
/// 8. [`Sections::notes_and_attributes`]: ELF notes and `.nv.info`
///    records.
pub(super) fn elf(r: &Region<'_>, what: &str) -> Result<()> {
    let header = elf_header(r, what)?;
    program_headers(r, &header)?;
    let sections = section_table(r, &header)?;
    sections.string_tables(header.shstrndx)?;
    let symbols = sections.symbol_tables()?;
    sections.relocations(&symbols)?;
    sections.section_infos(&symbols)?;
    sections.notes_and_attributes(&symbols)
}

/// The ELF64 header fields the later passes read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ElfHeader {
    pub(super) phoff: u64,
    pub(super) phentsize: u16,
    pub(super) phnum: u16,
    pub(super) shoff: u64,
    pub(super) shentsize: u16,
    pub(super) shnum: u16,
    pub(super) shstrndx: u16,
}

/// Pass 1: the 64-byte ELF header: a little-endian ELF64 of version 1 for
/// `EM_CUDA`, with a header size of at least 64.
pub(super) fn elf_header(r: &Region<'_>, what: &str) -> Result<ElfHeader> {
    let h = r.range(0, 64, &format!("the 64-byte ELF header of the {what}"))?;
    if h.bytes[4] != 2 {
        return Err(r.err(
            4,
            format!(
                "ELF class {} is not ELF64 (2); the driver loads 64-bit cubins",
                h.bytes[4]
            ),
        ));
    }
    if h.bytes[5] != 1 {
        return Err(r.err(
            5,
            format!("ELF data encoding {} is not little-endian (1)", h.bytes[5]),
        ));
    }
    if h.bytes[6] != 1 {
        return Err(r.err(
            6,
            format!("ELF identification version {} is not 1", h.bytes[6]),
        ));
    }
    let machine = r.u16(18, "e_machine")?;
    if machine != EM_CUDA {
        return Err(r.err(
            18,
            format!("e_machine is {machine}, not EM_CUDA ({EM_CUDA}): this ELF is not a cubin"),
        ));
    }
    let ehsize = r.u16(52, "e_ehsize")?;
    if ehsize < 64 {
        return Err(r.err(
            52,
            format!("e_ehsize is {ehsize}, smaller than the 64-byte ELF64 header"),
        ));
    }
    Ok(ElfHeader {
        phoff: r.u64(32, "e_phoff")?,
        phentsize: r.u16(54, "e_phentsize")?,
        phnum: r.u16(56, "e_phnum")?,
        shoff: r.u64(40, "e_shoff")?,
        shentsize: r.u16(58, "e_shentsize")?,
        shnum: r.u16(60, "e_shnum")?,
        shstrndx: r.u16(62, "e_shstrndx")?,
    })
}

/// Pass 2: the program header table, and every segment with bytes, lie
/// inside the image.
pub(super) fn program_headers(r: &Region<'_>, h: &ElfHeader) -> Result<()> {
    let (phoff, phnum) = (h.phoff, h.phnum);
    if phnum == 0 {
        return Ok(());
    }
    if h.phentsize != 56 {
        return Err(r.err(
            54,
            format!(
                "e_phentsize is {}, not 56 (an ELF64 program header)",
                h.phentsize
            ),
        ));
    }
    let table = r.range(
        phoff,
        u64::from(phnum) * 56,
        &format!("the program header table ({phnum} entries at e_phoff {phoff})"),
    )?;
    for i in 0..u64::from(phnum) {
        let at = i * 56;
        let p_offset = table.u64(at + 8, "p_offset")?;
        let p_filesz = table.u64(at + 32, "p_filesz")?;
        if p_filesz > 0 {
            r.range(
                p_offset,
                p_filesz,
                &format!("program header {i}'s segment"),
            )
            .map_err(|_| {
                table.err(
                    at + 8,
                    format!(
                        "program header {i}: segment at offset {p_offset} of {p_filesz} bytes runs past the end of the {} bytes",
                        r.len()
                    ),
                )
            })?;
        }
    }
    Ok(())
}

/// A cubin's checked section headers, for the passes that follow them.
pub(super) struct Sections<'a> {
    /// The whole ELF.
    pub(super) r: Region<'a>,
    /// The section header table.
    pub(super) table: Region<'a>,
    pub(super) list: Vec<Section>,
    pub(super) shnum: u16,
}

/// Pass 3: the section header table lies inside the image, and so does
/// every section (its offset, and its bytes unless it has none); header 0
/// is all zero; alignments, links and entry sizes are sane.
pub(super) fn section_table<'a>(r: &Region<'a>, h: &ElfHeader) -> Result<Sections<'a>> {
    let (shoff, shnum) = (h.shoff, h.shnum);
    if shnum == 0 {
        return Err(r.err(
            60,
            if shoff != 0 {
                "e_shnum is 0 with a section header table: extended section numbering (65,280 or more sections) is not supported".to_string()
            } else {
                "the cubin has no section headers; a cubin holds its kernels in sections".to_string()
            },
        ));
    }
    if h.shentsize != 64 {
        return Err(r.err(
            58,
            format!(
                "e_shentsize is {}, not 64 (an ELF64 section header)",
                h.shentsize
            ),
        ));
    }
    let table = r.range(
        shoff,
        u64::from(shnum) * 64,
        &format!("the section header table ({shnum} entries at e_shoff {shoff})"),
    )?;
    let list = (0..usize::from(shnum))
        .map(|i| section_header(r, &table, i, shnum))
        .collect::<Result<Vec<_>>>()?;
    Ok(Sections {
        r: *r,
        table,
        list,
        shnum,
    })
}

/// Section header `i` of `table` (of `shnum`), checked against the ELF `r`.
pub(super) fn section_header(
    r: &Region<'_>,
    table: &Region<'_>,
    i: usize,
    shnum: u16,
) -> Result<Section> {
    let at = i as u64 * 64;
    let s = Section {
        index: i,
        header: at,
        name: table.u32(at, "sh_name")?,
        kind: table.u32(at + 4, "sh_type")?,
        offset: table.u64(at + 24, "sh_offset")?,
        size: table.u64(at + 32, "sh_size")?,
        link: table.u32(at + 40, "sh_link")?,
        info: table.u32(at + 44, "sh_info")?,
        entsize: table.u64(at + 56, "sh_entsize")?,
    };
    if i == 0 {
        // SHN_UNDEF: the ELF specification's all-zero entry. The driver
        // reads it like any other (a corrupted sh_offset here crashed
        // cuModuleLoadData on the H200).
        let entry = table.range(0, 64, "section header 0")?;
        if let Some(k) = entry.bytes.iter().position(|&b| b != 0) {
            return Err(table.err(
                k as u64,
                "section header 0 (SHN_UNDEF) is not all zero bytes, as ELF requires".to_string(),
            ));
        }
    }
    if s.offset > r.len() as u64 {
        return Err(table.err(
            at + 24,
            format!(
                "section {i}: sh_offset {} lies past the end of the {} bytes",
                s.offset,
                r.len()
            ),
        ));
    }
    let align = table.u64(at + 48, "sh_addralign")?;
    if align > 1 << 16 || (align > 1 && !align.is_power_of_two()) {
        return Err(table.err(
            at + 48,
            format!("section {i}: sh_addralign {align} is not 0 or a power of two up to 65536"),
        ));
    }
    if s.kind != SHT_NOBITS && s.kind != SHT_NULL && s.size > 0 {
        r.range(s.offset, s.size, "").map_err(|_| {
            table.err(
                at + 24,
                format!(
                    "section {i}: its {} bytes at offset {} run past the end of the {} bytes",
                    s.size,
                    s.offset,
                    r.len()
                ),
            )
        })?;
    }
    if s.link >= u32::from(shnum) {
        return Err(table.err(
            at + 40,
            format!(
                "section {i}: sh_link {} is not a section index (there are {shnum})",
                s.link
            ),
        ));
    }
    if s.entsize > u64::from(u16::MAX) {
        return Err(table.err(
            at + 56,
            format!(
                "section {i}: sh_entsize {} is not a sane entry size",
                s.entsize
            ),
        ));
    }
    Ok(s)
}

/// The symbol tables of a cubin: each one's section index and symbol
/// count.
pub(super) type SymbolTables = Vec<(usize, u64)>;

/// The symbol count of the symbol table at section `index`; 0 when that
/// section is no symbol table.
pub(super) fn symbol_count(symbols: &SymbolTables, index: usize) -> u64 {
    symbols
        .iter()
        .find(|(i, _)| *i == index)
        .map_or(0, |&(_, n)| n)
}

impl<'a> Sections<'a> {
    /// The bytes of section `s` (none for `SHT_NOBITS` and `SHT_NULL`).
    pub(super) fn bytes_of(&self, s: &Section) -> Result<Region<'a>> {
        if s.kind == SHT_NOBITS || s.kind == SHT_NULL {
            Ok(Region {
                bytes: &[],
                base: self.r.base,
            })
        } else {
            self.r.range(s.offset, s.size, "section")
        }
    }

    /// Pass 4: `e_shstrndx` names a string table; every string table ends
    /// with a NUL (so a string starting inside one ends inside it); every
    /// section's name starts inside the section-name table.
    pub(super) fn string_tables(&self, shstrndx: u16) -> Result<()> {
        let shnum = self.shnum;
        if shstrndx >= shnum {
            return Err(self.r.err(
                62,
                format!("e_shstrndx {shstrndx} is not a section index (there are {shnum})"),
            ));
        }
        let shstr = &self.list[usize::from(shstrndx)];
        if shstr.kind != SHT_STRTAB {
            return Err(self.table.err(
                shstr.header + 4,
                format!(
                    "the section-name table (section {shstrndx}) has type {:#x}, not SHT_STRTAB",
                    shstr.kind
                ),
            ));
        }
        for s in &self.list {
            if s.kind == SHT_STRTAB && s.size > 0 {
                let b = self.bytes_of(s)?;
                if b.bytes.last() != Some(&0) {
                    return Err(b.err(
                        s.size - 1,
                        format!("string table (section {}) does not end with a NUL", s.index),
                    ));
                }
            }
        }
        for s in &self.list {
            if u64::from(s.name) >= shstr.size {
                return Err(self.table.err(
                    s.header,
                    format!(
                        "section {}: name offset {} is outside the {}-byte section-name table",
                        s.index, s.name, shstr.size
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Pass 5: every `SHT_SYMTAB` and `SHT_DYNSYM` table: 24-byte entries
    /// linked to a string table, each symbol's name inside it, its section
    /// index a section, and a function's bytes inside its section. Returns
    /// the tables with their symbol counts.
    pub(super) fn symbol_tables(&self) -> Result<SymbolTables> {
        let mut symbols = Vec::new();
        for s in self
            .list
            .iter()
            .filter(|s| s.kind == SHT_SYMTAB || s.kind == SHT_DYNSYM)
        {
            if s.entsize != 24 {
                return Err(self.table.err(
                    s.header + 56,
                    format!(
                        "symbol table (section {}): sh_entsize {} is not 24",
                        s.index, s.entsize
                    ),
                ));
            }
            if s.size % 24 != 0 {
                return Err(self.table.err(
                    s.header + 32,
                    format!(
                        "symbol table (section {}): size {} is not a multiple of 24",
                        s.index, s.size
                    ),
                ));
            }
            let strtab = &self.list[s.link as usize];
            if strtab.kind != SHT_STRTAB {
                return Err(self.table.err(
                    s.header + 40,
                    format!(
                        "symbol table (section {}): sh_link {} is not a string table",
                        s.index, s.link
                    ),
                ));
            }
            let b = self.bytes_of(s)?;
            for k in 0..s.size / 24 {
                self.symbol(&b, k, strtab.size)?;
            }
            symbols.push((s.index, s.size / 24));
        }
        Ok(symbols)
    }

    /// Symbol `k` of the symbol table bytes `b`, whose string table holds
    /// `strtab_size` bytes.
    pub(super) fn symbol(&self, b: &Region<'_>, k: u64, strtab_size: u64) -> Result<()> {
        let shnum = self.shnum;
        let at = k * 24;
        let name = b.u32(at, "st_name")?;
        if name != 0 && u64::from(name) >= strtab_size {
            return Err(b.err(
                at,
                format!(
                    "symbol {k}: name offset {name} is outside its {strtab_size}-byte string table"
                ),
            ));
        }
        let info = b.u8(at + 4, "st_info")?;
        let shndx = b.u16(at + 6, "st_shndx")?;
        if shndx < SHN_LORESERVE && shndx >= shnum {
            return Err(b.err(
                at + 6,
                format!("symbol {k}: section index {shndx} does not exist (there are {shnum})"),
            ));
        }
        let value = b.u64(at + 8, "st_value")?;
        let size = b.u64(at + 16, "st_size")?;
        if info & 0xf == STT_FUNC && shndx != 0 && shndx < SHN_LORESERVE {
            let code = &self.list[usize::from(shndx)];
            let end = value.checked_add(size);
            if code.kind != SHT_NOBITS && end.is_none_or(|e| e > code.size) {
                return Err(b.err(
                    at + 8,
                    format!(
                        "function symbol {k}: bytes {value}..+{size} lie outside its {}-byte section {shndx}",
                        code.size
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Pass 6: every `SHT_REL` and `SHT_RELA` table: entries of its kind's
    /// size, linked to a symbol table, applied to a section (`sh_info`);
    /// each relocation's symbol exists and its offset lies inside the
    /// target section.
    pub(super) fn relocations(&self, symbols: &SymbolTables) -> Result<()> {
        let shnum = self.shnum;
        for s in self
            .list
            .iter()
            .filter(|s| s.kind == SHT_REL || s.kind == SHT_RELA)
        {
            let want = if s.kind == SHT_RELA { 24 } else { 16 };
            if s.entsize != want || s.size % want != 0 {
                return Err(self.table.err(
                    s.header + 56,
                    format!(
                        "relocation table (section {}): entry size {} and size {} do not fit entries of {want} bytes",
                        s.index, s.entsize, s.size
                    ),
                ));
            }
            let Some(&(_, nsyms)) = symbols.iter().find(|(i, _)| *i == s.link as usize) else {
                return Err(self.table.err(
                    s.header + 40,
                    format!(
                        "relocation table (section {}): sh_link {} is not a symbol table",
                        s.index, s.link
                    ),
                ));
            };
            let target = self.list.get(s.info as usize).ok_or_else(|| {
                self.table.err(
                    s.header + 44,
                    format!(
                        "relocation table (section {}): sh_info {} is not a section index (there are {shnum})",
                        s.index, s.info
                    ),
                )
            })?;
            let b = self.bytes_of(s)?;
            for k in 0..s.size / want {
                let at = k * want;
                let offset = b.u64(at, "r_offset")?;
                let info = b.u64(at + 8, "r_info")?;
                if info >> 32 >= nsyms {
                    return Err(b.err(
                        at + 8,
                        format!(
                            "relocation {k}: symbol {} does not exist (the table has {nsyms})",
                            info >> 32
                        ),
                    ));
                }
                if target.kind != SHT_NOBITS && offset >= target.size {
                    return Err(b.err(
                        at,
                        format!(
                            "relocation {k}: offset {offset} is outside its {}-byte target section {}",
                            target.size, target.index
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Pass 7: every section's `sh_info`. The driver uses it as a section
    /// index (the function a `.nv.info.<fn>`, relocation table or constant
    /// bank belongs to), as the function's symbol in a code section (low 24
    /// bits), and as the count of local symbols in the symbol table.
    /// Out-of-range values crashed cuModuleLoadData on the H200
    /// (gpu_images seeds 0x36, 0x4c).
    pub(super) fn section_infos(&self, symbols: &SymbolTables) -> Result<()> {
        for s in &self.list {
            let flags = self.table.u64(s.header + 8, "sh_flags")?;
            if let Some(limit) = self.info_out_of_range(s, flags, symbols) {
                return Err(self.table.err(
                    s.header + 44,
                    format!(
                        "section {}: sh_info {} is out of range (there are {limit})",
                        s.index, s.info
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The limit section `s`'s `sh_info` passes (for the message), or
    /// `None` when it is in range.
    pub(super) fn info_out_of_range(
        &self,
        s: &Section,
        flags: u64,
        symbols: &SymbolTables,
    ) -> Option<String> {
        const SHF_EXECINSTR: u64 = 0x4;
        let shnum = self.shnum;
        let merc_syms = |index: usize| {
            self.list
                .get(index)
                .filter(|t| t.kind == SHT_CUDA_MERC_SYMTAB)
                .map(|t| t.size / 24)
        };
        if s.kind == SHT_SYMTAB {
            let n = symbol_count(symbols, s.index);
            (u64::from(s.info) > n).then(|| format!("{n} symbols"))
        } else if s.kind == SHT_CUDA_MERC_SYMTAB {
            // Like a symbol table's: the count of local symbols.
            let n = s.size / 24;
            (u64::from(s.info) > n).then(|| format!("{n} symbols"))
        } else if s.kind == SHT_CUDA_CAPMERC_TEXT {
            match merc_syms(s.link as usize) {
                Some(n) => (u64::from(s.info & 0x00ff_ffff) >= n)
                    .then(|| format!("{n} symbols in its merc symbol table")),
                None => Some(format!("no merc symbol table at its sh_link {}", s.link)),
            }
        } else if flags & SHF_EXECINSTR != 0 {
            // A code section's sh_info holds the function's symbol in its
            // low 24 bits and, for sm_75 to sm_89 cubins of nvcc 13.0, the
            // register count in the high 8 (e.g. 0x0400_0008: symbol 8, 4
            // registers, in `tests/images/one.sm75.cubin`).
            let n = symbol_count(symbols, s.link as usize);
            (u64::from(s.info & 0x00ff_ffff) >= n)
                .then(|| format!("{n} symbols in its symbol table"))
        } else {
            (s.info >= u32::from(shnum)).then(|| format!("{shnum} sections"))
        }
    }

    /// Pass 8: the ELF notes ([`notes`]) and the `.nv.info` attribute
    /// records ([`nv_info`]), whose symbol indices are checked against
    /// the section's linked symbol table.
    pub(super) fn notes_and_attributes(&self, symbols: &SymbolTables) -> Result<()> {
        for s in &self.list {
            match s.kind {
                SHT_NOTE => notes(&self.bytes_of(s)?, s.index)?,
                SHT_CUDA_INFO => nv_info(
                    &self.bytes_of(s)?,
                    s.index,
                    symbol_count(symbols, s.link as usize),
                )?,
                _ => {}
            }
        }
        Ok(())
    }
}

/// `.nv.info` attributes (format 4, sized) whose value starts with a
/// symbol index: PARAM_CBANK (0x0a), FRAME_SIZE (0x11), MIN_STACK_SIZE
/// (0x12), MAX_STACK_SIZE (0x23), REGCOUNT (0x2f). A corrupted index here
/// crashed cuModuleLoadData on the H200 (gpu_images seed 0x2c).
pub(super) const NV_INFO_SYMBOL_ATTRS: [u8; 5] = [0x0a, 0x11, 0x12, 0x23, 0x2f];

/// ELF notes: `namesz`, `descsz`, `type`, then name and descriptor, each
/// padded to 4 bytes; the notes tile the section.
pub(super) fn notes(b: &Region<'_>, index: usize) -> Result<()> {
    let mut at = 0u64;
    let len = b.len() as u64;
    while at < len {
        let what = format!("note in section {index}");
        let namesz = u64::from(b.u32(at, &what)?);
        let descsz = u64::from(b.u32(at + 4, &what)?);
        b.u32(at + 8, &what)?;
        let body = namesz.next_multiple_of(4) + descsz.next_multiple_of(4);
        b.range(at + 12, body, &format!("{what}: name and descriptor"))?;
        at += 12 + body;
    }
    Ok(())
}

/// `.nv.info` attribute records: a format byte, an attribute byte, then a
/// 2-byte value (formats 1 to 3) or a 2-byte size and that many bytes
/// (format 4); the records tile the section.
pub(super) fn nv_info(b: &Region<'_>, index: usize, nsyms: u64) -> Result<()> {
    let mut at = 0u64;
    let len = b.len() as u64;
    while at < len {
        let what = format!("attribute record in .nv.info section {index}");
        let format = b.u8(at, &what)?;
        let attr = b.u8(at + 1, &what)?;
        let size = match format {
            1..=3 => 0,
            4 => u64::from(b.u16(at + 2, &what)?),
            other => {
                return Err(b.err(
                    at,
                    format!("{what}: unknown record format {other} (expected 1 to 4)"),
                ));
            }
        };
        b.range(at, 4 + size, &what)?;
        if format == 4 && size >= 4 && NV_INFO_SYMBOL_ATTRS.contains(&attr) {
            let sym = u64::from(b.u32(at + 4, &what)?);
            if sym >= nsyms {
                return Err(b.err(
                    at + 4,
                    format!(
                        "{what}: attribute {attr:#04x} names symbol {sym}, but the symbol table has {nsyms}"
                    ),
                ));
            }
        }
        at += 4 + size;
    }
    Ok(())
}
