//! How a daemon setting is defined once: [`settings!`] takes each setting's key, kind,
//! value name, help and how `--check` shows it, and makes from them the flag (clap), the
//! TOML key, the `--check` line, reload's list of what waits for a restart, and the
//! docs' table. `keys.rs` holds the one list; `config.rs` the one conversion into the
//! settings the daemon uses.

/// `ConfigFlags`, its fields of concrete types (clap's derive reads `Option`/`Vec` from
/// the tokens): each setting's kind muncher-expanded into its field.
macro_rules! flags_struct {
    (@fields [$($fields:tt)*]) => {
        /// The settings as given on the command line, or in the file (each `None`/empty
        /// where not given): the file's name, and the values that win over the file's.
        #[derive(Clone, Debug, Default, clap::Args)]
        pub struct ConfigFlags {
            /// Settings in TOML (the keys are the long flags' names with `_`); flags win.
            /// Durations, here and in every flag: seconds (10, 1.5) or 500ms, 10s, 2m, 1h, 7d
            #[arg(long, value_name = "FILE")]
            pub config: Option<std::path::PathBuf>,
            $($fields)*
            /// The lock that keeps one daemon per node [default: /run/rocsync/daemon.lock]
            /// (tests run daemons side by side)
            #[arg(long, value_name = "PATH", hide = true)]
            pub lock: Option<std::path::PathBuf>,
        }
    };
    (@fields [$($fields:tt)*] [$($doc:literal)+] $key:ident list $value:literal {$help:expr}; $($rest:tt)*) => {
        $crate::daemon::settings::defined::flags_struct!(@fields [$($fields)*
            $(#[doc = $doc])+ #[arg(long, value_name = $value, help = $help)] pub $key: Vec<String>,
        ] $($rest)*);
    };
    (@fields [$($fields:tt)*] [$($doc:literal)+] $key:ident labels $value:literal {$help:expr}; $($rest:tt)*) => {
        $crate::daemon::settings::defined::flags_struct!(@fields [$($fields)*
            $(#[doc = $doc])+ #[arg(long, value_name = $value, value_delimiter = ',', help = $help)] pub $key: Vec<String>,
        ] $($rest)*);
    };
    (@fields [$($fields:tt)*] [$($doc:literal)+] $key:ident path $value:literal {$help:expr}; $($rest:tt)*) => {
        $crate::daemon::settings::defined::flags_struct!(@fields [$($fields)*
            $(#[doc = $doc])+ #[arg(long, value_name = $value, help = $help)] pub $key: Option<std::path::PathBuf>,
        ] $($rest)*);
    };
    (@fields [$($fields:tt)*] [$($doc:literal)+] $key:ident count $value:literal {$help:expr}; $($rest:tt)*) => {
        $crate::daemon::settings::defined::flags_struct!(@fields [$($fields)*
            $(#[doc = $doc])+ #[arg(long, value_name = $value, help = $help)] pub $key: Option<usize>,
        ] $($rest)*);
    };
    // Durations take `-5` as a value, to say clearly what is wrong with it.
    (@fields [$($fields:tt)*] [$($doc:literal)+] $key:ident duration $value:literal {$help:expr}; $($rest:tt)*) => {
        $crate::daemon::settings::defined::flags_struct!(@fields [$($fields)*
            $(#[doc = $doc])+ #[arg(long, value_name = $value, allow_negative_numbers = true, help = $help)] pub $key: Option<String>,
        ] $($rest)*);
    };
    (@fields [$($fields:tt)*] [$($doc:literal)+] $key:ident $kind:ident $value:literal {$help:expr}; $($rest:tt)*) => {
        $crate::daemon::settings::defined::flags_struct!(@fields [$($fields)*
            $(#[doc = $doc])+ #[arg(long, value_name = $value, help = $help)] pub $key: Option<String>,
        ] $($rest)*);
    };
}

/// A TOML value as a setting of `kind` takes it; `key` names it in errors.
macro_rules! from_toml {
    (list, $key:expr, $v:expr) => {
        $crate::daemon::settings::defined::strings($key, $v)?
    };
    (labels, $key:expr, $v:expr) => {
        $crate::daemon::settings::defined::strings($key, $v)?
    };
    (path, $key:expr, $v:expr) => {
        Some($crate::daemon::settings::defined::text($key, $v)?.into())
    };
    (count, $key:expr, $v:expr) => {
        Some($crate::daemon::settings::defined::count($key, $v)?)
    };
    (duration, $key:expr, $v:expr) => {
        Some($crate::daemon::settings::defined::seconds($key, $v)?)
    };
    ($other:ident, $key:expr, $v:expr) => {
        Some($crate::daemon::settings::defined::text($key, $v)?)
    };
}

/// A setting's typed value: what was given parsed as its definition's `as TYPE`, else
/// its `= DEFAULT` parsed the same way (`None` where neither); paths and counts are
/// typed as given.
macro_rules! typed {
    ($key:ident $kind:ident [$ty:ty] [$default:expr]) => {
        #[doc = concat!("`", stringify!($key), "` as given, else its default.")]
        pub fn $key(&self) -> anyhow::Result<$ty> {
            let given = self.$key.as_deref().unwrap_or($default);
            $crate::daemon::settings::value::parsed(stringify!($key), given)
        }
    };
    ($key:ident $kind:ident [$ty:ty] []) => {
        #[doc = concat!("`", stringify!($key), "` as given, if it was.")]
        pub fn $key(&self) -> anyhow::Result<Option<$ty>> {
            let given = self.$key.as_deref();
            (given.map(|v| $crate::daemon::settings::value::parsed(stringify!($key), v)))
                .transpose()
        }
    };
    ($key:ident path [] [$default:expr]) => {
        #[doc = concat!("`", stringify!($key), "` as given, else its default.")]
        pub fn $key(&self) -> std::path::PathBuf {
            self.$key.clone().unwrap_or_else(|| $default.into())
        }
    };
    ($key:ident count [] [$default:expr]) => {
        #[doc = concat!("`", stringify!($key), "` as given, else its default.")]
        pub fn $key(&self) -> usize {
            self.$key.unwrap_or($default)
        }
    };
    ($key:ident $kind:ident [] []) => {};
}

/// A setting's default as its help says it.
macro_rules! default_shown {
    ([$default:expr]) => {
        Some(|| $default.to_string())
    };
    ([]) => {
        None
    };
}

/// Defines the settings: `ConfigFlags` (the flags and the file's keys, as given), each
/// setting's typed value, and [`SETTINGS`]. Each entry: doc comment (the help), `key:
/// kind "VALUE"`, `as TYPE` (what its text parses into: `value.rs`), `= DEFAULT` (its
/// one default, as it would be given), `, restart` when a reload keeps the value taken
/// at start, then `=> |config| how --check shows it`.
macro_rules! settings {
    ($(
        $(#[doc = $doc:literal])+
        $key:ident : $kind:ident $value:literal $(as $ty:ty)? $(= $default:expr)? $(, $restart:ident)?
            => |$c:ident| $shown:expr;
    )+) => {
        $crate::daemon::settings::defined::flags_struct!(@fields []
            $([$($doc)+] $key $kind $value {
                $crate::daemon::settings::defined::help(
                    concat!($($doc, "\n"),+),
                    $crate::daemon::settings::defined::default_shown!([$($default)?]),
                )
            };)+
        );

        impl ConfigFlags {
            $($crate::daemon::settings::defined::typed!($key $kind [$($ty)?] [$($default)?]);)+

            /// A configuration file's keys, each checked for its kind.
            pub fn from_toml(table: toml::Table) -> anyhow::Result<Self> {
                let mut given = Self::default();
                for (key, v) in table {
                    match key.as_str() {
                        $(stringify!($key) => given.$key = $crate::daemon::settings::defined::from_toml!($kind, &key, v),)+
                        _ => anyhow::bail!(
                            "unknown field `{key}`, expected one of {}",
                            SETTINGS.iter().map(|s| format!("`{}`", s.key)).collect::<Vec<_>>().join(", ")
                        ),
                    }
                }
                Ok(given)
            }

            /// These settings where given, else `file`'s.
            pub fn over(&self, file: Self) -> Self {
                use $crate::daemon::settings::defined::Over as _;
                Self {
                    config: self.config.clone(),
                    $($key: self.$key.clone().over(file.$key),)+
                    lock: self.lock.clone(),
                }
            }
        }

        /// Every setting, in the order `--check` prints them.
        pub(crate) const SETTINGS: &[$crate::daemon::settings::defined::Setting] = &[$(
            $crate::daemon::settings::defined::Setting {
                key: stringify!($key),
                value: $value,
                doc: concat!($($doc, "\n"),+),
                default: $crate::daemon::settings::defined::default_shown!([$($default)?]),
                restart: stringify!($($restart)?).len() > 0,
                shown: |$c: &$crate::daemon::settings::effect::DaemonConfig| $shown,
            },
        )+];
    };
}

pub(crate) use {default_shown, flags_struct, from_toml, settings, typed};

/// One setting, as its definition says.
pub(crate) struct Setting {
    /// The TOML key; the flag is `--` and the key with `-` for `_`.
    pub key: &'static str,
    /// What its value is (`DURATION`, `SIZE`, …), and its help: clap has them from the
    /// same definition; here for the docs' table (its test).
    #[cfg_attr(not(test), allow(dead_code))]
    pub value: &'static str,
    #[cfg_attr(not(test), allow(dead_code))]
    pub doc: &'static str,
    /// Its default as given (none: not set, or a description in `doc`).
    #[cfg_attr(not(test), allow(dead_code))]
    pub default: Option<fn() -> String>,
    /// A reload keeps the value taken at start (said, when it changed).
    pub restart: bool,
    /// How `--check` shows it, from the settings in effect.
    pub shown: fn(&super::effect::DaemonConfig) -> String,
}

impl Setting {
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn flag(&self) -> String {
        format!("--{}", self.key.replace('_', "-"))
    }

    /// Its help, as `--help` and the docs' table say it.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn help(&self) -> String {
        help(self.doc, self.default)
    }
}

/// A setting's help: its doc comment's lines as one, and its default.
pub(crate) fn help(doc: &str, default: Option<fn() -> String>) -> String {
    let doc = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    match default {
        Some(d) => format!("{doc} [default: {}]", d()),
        None => doc,
    }
}

/// A flag's value where given, else the file's.
pub(crate) trait Over {
    fn over(self, file: Self) -> Self;
}

impl<T> Over for Option<T> {
    fn over(self, file: Self) -> Self {
        self.or(file)
    }
}

impl<T> Over for Vec<T> {
    fn over(self, file: Self) -> Self {
        if self.is_empty() { file } else { self }
    }
}

fn wrong(key: &str, expected: &str, v: &toml::Value) -> anyhow::Error {
    anyhow::anyhow!(
        "invalid type: {} `{v}`, expected {expected} for key `{key}`",
        v.type_str()
    )
}

pub(crate) fn text(key: &str, v: toml::Value) -> anyhow::Result<String> {
    match v {
        toml::Value::String(s) => Ok(s),
        v => Err(wrong(key, "a string", &v)),
    }
}

pub(crate) fn strings(key: &str, v: toml::Value) -> anyhow::Result<Vec<String>> {
    let toml::Value::Array(items) = v else {
        return Err(wrong(key, "a list of strings", &v));
    };
    items.into_iter().map(|i| text(key, i)).collect()
}

pub(crate) fn count(key: &str, v: toml::Value) -> anyhow::Result<usize> {
    match v {
        toml::Value::Integer(n) if n >= 0 => Ok(n as usize),
        v => Err(wrong(key, "a whole number", &v)),
    }
}

/// A duration: a string such as "500ms", or seconds as a number.
pub(crate) fn seconds(key: &str, v: toml::Value) -> anyhow::Result<String> {
    match v {
        toml::Value::String(s) => Ok(s),
        toml::Value::Integer(n) => Ok(n.to_string()),
        toml::Value::Float(x) => Ok(x.to_string()),
        v => Err(wrong(
            key,
            "a duration: seconds (10, 1.5) or a string such as \"500ms\"",
            &v,
        )),
    }
}
