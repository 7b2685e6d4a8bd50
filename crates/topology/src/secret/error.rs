//! Why a secret reference could not be resolved ([`SecretError`]), and why
//! the server's secret policy refused one ([`AccessError`], whose rules are
//! in `crate::secret_access`). Both sit here, below the resolver and the
//! policy, so each can name the other's failures without the two modules
//! importing each other.

/// A secret reference could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error(
        "`{field}` references environment variable `{name}`, which is not set (set it in the environment of the process that builds the pipeline)"
    )]
    EnvMissing { field: String, name: String },
    #[error("`{field}` references secrets file `{path}`, which cannot be read: {source}")]
    FileUnreadable {
        field: String,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{field}`: {problem}")]
    Malformed { field: String, problem: String },
    /// Not allowed by the server's `[secrets]` section or in this field.
    #[error("{0} (hint: {hint})", hint = .0.hint())]
    Denied(#[from] AccessError),
}

impl SecretError {
    pub fn code(&self) -> &'static str {
        match self {
            SecretError::EnvMissing { .. } => "secret_env_missing",
            SecretError::FileUnreadable { .. } => "secret_file_unreadable",
            SecretError::Malformed { .. } => "secret_reference_malformed",
            SecretError::Denied(e) => e.code(),
        }
    }
}

/// Why a reference may not be read or sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccessError {
    #[error(
        "`{field}` holds a secret reference, but this field is not meant for secrets: it would be resolved into text (templates, prompts, bodies, descriptions)"
    )]
    Misplaced { field: String },
    #[error(
        "`{field}` reads environment variable `{name}`, one of the server's own credentials, which topologies may never read"
    )]
    ServerOwn { field: String, name: String },
    #[error(
        "`{field}` reads environment variable `{name}`, which the server's `[secrets] env` allow-list does not include"
    )]
    EnvNotAllowed { field: String, name: String },
    #[error(
        "`{field}` reads `{path}`, which is outside the directories secrets may be read from ({dirs})"
    )]
    FileNotAllowed {
        field: String,
        path: String,
        dirs: String,
    },
    #[error(
        "`{field}` sends credential `{credential}` to `{host}`, but it may only be sent to {allowed}"
    )]
    HostNotAllowed {
        field: String,
        credential: String,
        host: String,
        allowed: String,
    },
}

impl AccessError {
    pub fn code(&self) -> &'static str {
        match self {
            AccessError::Misplaced { .. } => "secret_misplaced",
            AccessError::ServerOwn { .. } => "secret_server_own",
            AccessError::EnvNotAllowed { .. } => "secret_env_not_allowed",
            AccessError::FileNotAllowed { .. } => "secret_file_not_allowed",
            AccessError::HostNotAllowed { .. } => "secret_host_not_allowed",
        }
    }

    /// What to do about it.
    pub fn hint(&self) -> &'static str {
        match self {
            AccessError::Misplaced { .. } => {
                "reference secrets only in `headers`, `api_key_env`, URL userinfo or a field named for a secret (`api_key`, `token`, `password`); pass data to templates through the request input"
            }
            AccessError::ServerOwn { .. } => {
                "give the node its own credential in another variable and list it in `[secrets] env`"
            }
            AccessError::EnvNotAllowed { .. } => {
                "add the variable to `[secrets] env` in the server config"
            }
            AccessError::FileNotAllowed { .. } => {
                "mount the secret under /run/secrets, or add its directory to `[secrets] dirs` in the server config"
            }
            AccessError::HostNotAllowed { .. } => {
                "point the node at a host listed for this credential in `[secrets.hosts]`, or use another credential"
            }
        }
    }
}
