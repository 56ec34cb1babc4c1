//! Operations of the `auth` tests (documents in tests/graphql/auth/). Some are used by the
//! `hostile` tests too.
#[allow(unused_imports)]
use super::*;

operation!(Signup, "graphql/auth/signup.graphql");
operation!(SignupConfig, "graphql/auth/signup_config.graphql");
operation!(MeDetails, "graphql/auth/me_details.graphql");
operation!(Logout, "../web/graphql/login/logout.graphql");
operation!(ChangePassword, "graphql/auth/change_password.graphql");
operation!(
    UpdatePasswordNoAuth,
    "graphql/auth/update_password_no_auth.graphql"
);
operation!(KeypairUse, "graphql/auth/keypair_use.graphql");
operation!(SshPublicKeys, "graphql/auth/ssh_public_keys.graphql");
operation!(
    RefreshSshKeypair,
    "../web/graphql/account/refresh_ssh_keypair.graphql"
);
