//! What is emitted after an error: the errors, the module as written, and a `Model` with an empty
//! `Layer` and a bare `ProxyModel` descriptor. Code that uses the model, or extends it, then still
//! resolves, so one mistake gives one error rather than forty. Nothing is registered.

use quote::quote;

use crate::ast::Module;
use crate::attr::Args;
use crate::check::Model;
use crate::ctxt::Errors;
use crate::expand::{model_struct, module_with};

/// The errors and a stand-in for the model.
pub(crate) fn expand(
    args: &Args,
    module: Module,
    model: &Model,
    errors: Errors,
) -> proc_macro2::TokenStream {
    let errors = errors.into_tokens();
    let krate = args.krate();
    let private = quote!(#krate::__private);
    // The hooks, tools and observers are not called from a `Layer` now.
    let allow = syn::parse_quote!(#[allow(dead_code)]);
    if module.own_model.is_some() {
        // The user's own `Model` is in the way; adding one would only add an error.
        let item = module_with(module.item, &model.dropped, &krate, quote!(), Some(allow));
        return quote!(#errors #item);
    }
    let ident = module.item.ident.clone();
    let ident_text = ident.to_string();
    let name = &model.name;
    let model_struct = model_struct(name);
    let inner = quote! {
        #model_struct
        impl #private::Layer for Model {}
    };
    let item = module_with(module.item, &model.dropped, &krate, inner, Some(allow));
    quote! {
        #errors
        #item
        const _: () = {
            impl #private::ProxyModel for #ident::Model {
                const DESCRIPTOR: &'static #private::ModelDescriptor = &#private::ModelDescriptor {
                    name: #name,
                    summary: "",
                    docs: "",
                    defined_at: ::core::concat!(::core::module_path!(), "::", #ident_text),
                    parents: &[],
                    hooks: #private::HookSet::EMPTY,
                    chained: #private::HookSet::EMPTY,
                    owners: [::core::option::Option::None; #private::HookId::COUNT],
                    tools: &[],
                    observers: &[],
                    layer: &#ident::Model,
                    config: ::core::option::Option::None,
                    state: ::core::option::Option::None,
                };
            }
        };
    }
}
