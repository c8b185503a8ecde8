//! Naming code addresses from an object's symbol table (`.symtab`, else `.dynsym`: what a
//! stripped library still exports): the function whose range holds the address. One pass
//! over the table per object for all its addresses; names are read only for the winners.
//! No debug information is read (no inlined frames, no lines).

use object::{Object as _, ObjectSymbol as _, ReadRef, SymbolKind, read::ReadCache};

use super::objects::{Image, MappedObject};

/// A symbol of no size is taken only this close below an address (hand-written
/// assembly); farther, the address more likely belongs to a function the table omits.
const UNSIZED_REACH: u64 = 4096;

/// The name of each of `svmas` (addresses in the object's own space), demangled.
pub(super) fn names(object: &MappedObject, svmas: &[u64]) -> Vec<Option<String>> {
    let parsed = match &object.image {
        Image::File(file) => {
            let cache = ReadCache::new(file);
            object::File::parse(&cache).map(|elf| names_in(&elf, svmas))
        }
        Image::Memory(bytes) => object::File::parse(&bytes[..]).map(|elf| names_in(&elf, svmas)),
    };
    parsed.unwrap_or_else(|_| vec![None; svmas.len()])
}

fn names_in<'d, R: ReadRef<'d>>(elf: &object::File<'d, R>, svmas: &[u64]) -> Vec<Option<String>> {
    let mut symbols = elf.symbols().peekable();
    let table = match symbols.peek() {
        Some(_) => symbols,
        None => elf.dynamic_symbols().peekable(),
    };
    // Per address: (start, rank, name) of the best symbol so far.
    let mut best: Vec<Option<(u64, u8, String)>> = vec![None; svmas.len()];
    for symbol in table {
        if symbol.kind() != SymbolKind::Text || symbol.is_undefined() {
            continue;
        }
        let (start, size) = (symbol.address(), symbol.size());
        for (i, &pc) in svmas.iter().enumerate() {
            let holds = start <= pc
                && match size {
                    0 => pc - start < UNSIZED_REACH,
                    n => pc - start < n,
                };
            if !holds {
                continue;
            }
            if best[i].as_ref().is_some_and(|(s, _, _)| *s > start) {
                continue;
            }
            let Ok(name) = symbol.name() else {
                continue;
            };
            // Of aliases, the sized, global, public one (`clock_nanosleep`, not
            // `__clock_nanosleep`).
            let rank = u8::from(size > 0) * 4
                + u8::from(symbol.is_global()) * 2
                + u8::from(!name.starts_with('_'));
            if best[i]
                .as_ref()
                .is_some_and(|(s, r, _)| (*s, *r) >= (start, rank))
            {
                continue;
            }
            best[i] = Some((start, rank, name.to_string()));
        }
    }
    best.into_iter()
        .map(|b| b.map(|(_, _, name)| demangled(name)))
        .collect()
}

/// C++ names as written in the source (`at::native::foo(…)`); others as they are.
fn demangled(name: String) -> String {
    if !name.starts_with("_Z") {
        return name;
    }
    cpp_demangle::Symbol::new(name.as_bytes())
        .ok()
        .and_then(|s| s.demangle().ok())
        .unwrap_or(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpp_names_are_demangled_and_others_kept() {
        assert_eq!(demangled("_ZN2at6native3fooEv".into()), "at::native::foo()");
        assert_eq!(demangled("clock_nanosleep".into()), "clock_nanosleep");
        assert_eq!(demangled("_Zgarbage".into()), "_Zgarbage");
    }
}
