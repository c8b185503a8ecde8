//! The names Kubernetes gives: DNS-1123 labels (namespaces) and subdomains (pod names),
//! checked before a name read from the host is believed.

/// A DNS-1123 label, as namespaces are: 1 to 63 of `a-z`, `0-9`, `-`, alphanumeric at
/// both ends.
pub fn is_dns_label(s: &str) -> bool {
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    (1..=63).contains(&s.len())
        && s.bytes().all(|b| alnum(b) || b == b'-')
        && s.bytes().next().is_some_and(alnum)
        && s.bytes().last().is_some_and(alnum)
}

/// A DNS-1123 subdomain, as pod names are: labels joined by `.`, at most 253 in all.
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}
