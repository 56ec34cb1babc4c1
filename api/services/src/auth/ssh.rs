//! Per-user SSH keypairs in OpenSSH format (ed25519).
use rand::Rng;
use ssh_key::private::Ed25519Keypair;
use ssh_key::{LineEnding, PrivateKey};

use crate::error::{ApiError, ApiResult};

/// Returns `(public key line, private key PEM)`.
pub fn generate(comment: &str) -> ApiResult<(String, String)> {
    let seed: [u8; 32] = rand::thread_rng().r#gen();
    let keypair = Ed25519Keypair::from_seed(&seed);
    let private = PrivateKey::new(keypair.into(), comment)
        .map_err(|e| ApiError::internal("generating an SSH keypair", e))?;
    let public = private
        .public_key()
        .to_openssh()
        .map_err(|e| ApiError::internal("encoding an SSH public key", e))?;
    let pem = private
        .to_openssh(LineEnding::LF)
        .map_err(|e| ApiError::internal("encoding an SSH private key", e))?;
    Ok((public, pem.to_string()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn openssh_format() {
        let (public, private) = super::generate("user@bai").unwrap();
        assert!(public.starts_with("ssh-ed25519 AAAA"), "{public}");
        assert!(public.ends_with(" user@bai"));
        assert!(private.starts_with("-----BEGIN OPENSSH PRIVATE KEY-----"));
        let parsed = ssh_key::PrivateKey::from_openssh(&private).unwrap();
        assert_eq!(parsed.public_key().to_openssh().unwrap(), public);
    }
}
