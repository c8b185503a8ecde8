//! Where traces go: `s3://BUCKET[/PREFIX]`, on AWS or an S3-compatible server, through
//! the `object_store` crate (request signing, credential providers). Credentials come
//! from the usual places, never from the configuration file (it is world-readable in
//! /etc): the `AWS_*` environment variables, then the shared credentials file, then
//! what `object_store` finds itself (web identity for IRSA, the container or instance
//! metadata endpoints).

use std::{fmt, str::FromStr, sync::Arc, time::Duration};

use anyhow::{Context as _, Result, bail};
use object_store::{
    ClientOptions, ObjectStore, RetryConfig,
    aws::{AmazonS3Builder, AmazonS3ConfigKey},
};

use crate::daemon::outputs::upload::credentials;

/// A bucket and the key prefix every object gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S3Url {
    pub bucket: String,
    /// Without leading or trailing `/`; may be empty.
    pub prefix: String,
}

/// A URL as logs and `--check` show it: whatever precedes its last `@` (a `user:password`,
/// however mangled: `http:/u:pw@h`, `http://u:p#w@h`) and any query (a presigned
/// signature) replaced, control characters escaped; they are pasted into tickets and CI
/// logs.
pub(crate) fn redacted(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((s, r)) => (format!("{s}://"), r),
        None => (String::new(), url),
    };
    let rest = match rest.rsplit_once('@') {
        Some((_, after)) => format!("REDACTED@{after}"),
        None => rest.to_string(),
    };
    let rest = match rest.split_once('?') {
        Some((p, _)) => format!("{p}?REDACTED"),
        None => rest,
    };
    crate::daemon::untrusted::shown(&format!("{scheme}{rest}"))
}

impl FromStr for S3Url {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self> {
        let shown = redacted(s);
        let Some(rest) = s.strip_prefix("s3://") else {
            bail!("{shown:?}: expected s3://BUCKET or s3://BUCKET/PREFIX");
        };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        // S3's bucket naming rules, which S3-compatible servers share.
        let ok = (3..=63).contains(&bucket.len())
            && bucket
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-');
        if !ok {
            let bucket = redacted(bucket);
            bail!("{shown:?}: {bucket:?} is not a bucket name (3-63 of a-z, 0-9, '.', '-')");
        }
        let prefix = prefix.trim_matches('/');
        if prefix
            .split('/')
            .any(|p| p.is_empty() || p == "." || p == "..")
            && !prefix.is_empty()
        {
            bail!("{shown:?}: the prefix has an empty, '.' or '..' part");
        }
        Ok(Self {
            bucket: bucket.into(),
            prefix: prefix.into(),
        })
    }
}

impl fmt::Display for S3Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.prefix.as_str() {
            "" => write!(f, "s3://{}", self.bucket),
            p => write!(f, "s3://{}/{p}", self.bucket),
        }
    }
}

/// The upload settings (`upload`, `upload_endpoint`, `upload_region`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StoreSettings {
    pub destination: S3Url,
    /// An S3-compatible server's URL (path-style requests); `None`: AWS, or
    /// `AWS_ENDPOINT_URL` when set.
    pub endpoint: Option<String>,
    pub region: Option<String>,
}

/// One try of a request may take this long; a server that does not answer is a failed
/// upload, retried by the uploader with its own backoff (and counted).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// An endpoint is an HTTP(S) URL with a host, by the URL standard (no blank or control
/// character, which its parser would drop silently): checked with the settings
/// (`--check` says so), and again when the store opens (AWS_ENDPOINT_URL is read then).
pub(crate) fn check_endpoint(e: &str) -> Result<()> {
    let plain = !e.chars().any(|c| c.is_whitespace() || c.is_control());
    let url = url::Url::parse(e).ok().filter(|_| plain);
    match url {
        Some(u)
            if matches!(u.scheme(), "http" | "https")
                && u.host_str().is_some_and(|h| !h.is_empty()) =>
        {
            Ok(())
        }
        _ => bail!(
            "upload_endpoint {:?}: expected http://HOST[:PORT] or https://...",
            redacted(e)
        ),
    }
}

/// The store for `s`, its credentials found now.
pub(super) fn open(s: &StoreSettings) -> Result<Arc<dyn ObjectStore>> {
    // reqwest's rustls has no provider of its own (see Cargo.toml); an error only says
    // one is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut b = AmazonS3Builder::from_env().with_bucket_name(&s.destination.bucket);
    // The AWS SDKs' name for it; object_store reads only AWS_ENDPOINT(_URL_S3).
    let endpoint = s
        .endpoint
        .clone()
        .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok());
    let mut client = ClientOptions::new()
        .with_timeout(REQUEST_TIMEOUT)
        .with_connect_timeout(CONNECT_TIMEOUT);
    if let Some(e) = endpoint {
        check_endpoint(&e)?;
        // Asking for a plain-HTTP endpoint by name is consent to plain HTTP.
        client = client.with_allow_http(e.starts_with("http://"));
        b = b.with_endpoint(e).with_virtual_hosted_style_request(false);
    }
    if let Some(r) = &s.region {
        b = b.with_region(r);
    }
    if std::env::var_os("AWS_ACCESS_KEY_ID").is_none()
        && let Some(c) = credentials::from_shared_file()?
    {
        b = b
            .with_access_key_id(c.access_key_id)
            .with_secret_access_key(c.secret_access_key);
        if let Some(t) = c.session_token {
            b = b.with_config(AmazonS3ConfigKey::Token, t);
        }
    }
    let retry = RetryConfig {
        max_retries: 2,
        retry_timeout: Duration::from_secs(20),
        ..RetryConfig::default()
    };
    let store = b
        .with_retry(retry)
        .with_client_options(client)
        .build()
        .with_context(|| format!("upload to {}", s.destination))?;
    Ok(Arc::new(store))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_and_queries_never_show() {
        assert_eq!(
            redacted("http://KEY:SECRET@minio:9000/x?X-Amz-Signature=S"),
            "http://REDACTED@minio:9000/x?REDACTED"
        );
        assert_eq!(redacted("http://minio:9000"), "http://minio:9000");
        assert_eq!(redacted("https://a@b@host/p"), "https://REDACTED@host/p");
        // Mangled credentials are credentials still, and a line cannot be forged.
        for (typed, shown) in [
            ("http:/u:s3cr3t@host", "REDACTED@host"),
            ("http://user:pa#s3cr3t@host", "http://REDACTED@host"),
            ("http://user:pa/s3cr3t@host", "http://REDACTED@host"),
        ] {
            assert_eq!(redacted(typed), shown);
        }
        assert!(!redacted("http://h\nx").contains('\n'));
        let e = "s3://KEY:SECRET@bkt/p".parse::<S3Url>().unwrap_err();
        assert!(!format!("{e:#}").contains("SECRET"), "{e:#}");
    }

    #[test]
    fn a_bucket_and_a_prefix_or_a_clear_error() {
        let d: S3Url = "s3://traces/fleet/a/".parse().unwrap();
        assert_eq!(
            (d.bucket.as_str(), d.prefix.as_str()),
            ("traces", "fleet/a")
        );
        assert_eq!(d.to_string(), "s3://traces/fleet/a");
        let d: S3Url = "s3://traces".parse().unwrap();
        assert_eq!(d.prefix, "");
        assert_eq!(d.to_string(), "s3://traces");
        for bad in [
            "traces",
            "s3://",
            "s3://Traces",
            "s3://ab",
            "s3://t r",
            "s3://tr/a//b",
        ] {
            let e = bad.parse::<S3Url>().unwrap_err().to_string();
            assert!(
                e.contains("expected s3://") || e.contains("bucket") || e.contains("part"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn an_endpoint_must_be_a_url() {
        let s = StoreSettings {
            destination: "s3://traces".parse().unwrap(),
            endpoint: Some("localhost:9000".into()),
            region: None,
        };
        let e = open(&s).err().unwrap().to_string();
        assert!(e.contains("expected http://"), "{e}");
        for bad in ["ftp://h", "http://", "http://:9000", "file:///etc"] {
            assert!(check_endpoint(bad).is_err(), "{bad}");
        }
        for good in [
            "http://127.0.0.1:9000",
            "https://s3.example.com/",
            "http://h",
        ] {
            assert!(check_endpoint(good).is_ok(), "{good}");
        }
    }
}
