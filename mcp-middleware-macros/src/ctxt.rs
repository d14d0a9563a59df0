//! [`Errors`]: every error the macro finds, collected and reported together (as serde's `Ctxt`
//! does), so a user sees all their mistakes in one build.

use proc_macro2::TokenStream;
use quote::ToTokens;

/// The errors found so far.
#[derive(Default)]
pub(crate) struct Errors {
    all: Option<syn::Error>,
}

impl Errors {
    /// Adds an error.
    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.all {
            Some(all) => all.combine(error),
            None => self.all = Some(error),
        }
    }

    /// Adds an error spanning `tokens`.
    pub(crate) fn spanned(&mut self, tokens: impl ToTokens, message: impl std::fmt::Display) {
        self.push(syn::Error::new_spanned(tokens, message));
    }

    /// Adds an error at `span`.
    pub(crate) fn at(&mut self, span: proc_macro2::Span, message: impl std::fmt::Display) {
        self.push(syn::Error::new(span, message));
    }

    /// Whether nothing went wrong.
    pub(crate) fn is_empty(&self) -> bool {
        self.all.is_none()
    }

    /// The errors as `compile_error!` invocations, or nothing.
    pub(crate) fn into_tokens(self) -> TokenStream {
        self.all
            .map(|all| all.into_compile_error())
            .unwrap_or_default()
    }
}
