//! The `#[tool]` attribute of `module-sdk`.
//!
//! ```ignore
//! /// Say hello to someone.
//! #[tool(permission = "user", read_only, timeout_seconds = 10)]
//! async fn greet(ctx: Context, args: Greet) -> Result<Greeting, ToolError> { ... }
//! ```
//!
//! becomes `fn greet() -> Tool`, which `Module::tool` accepts as it is: the
//! function's name is the tool's name, its doc comment the description (a
//! tool without one does not compile), and the attribute's options the
//! manifest's permission, annotations and timeout. The original function
//! lives on inside it as the handler; tests call it through `TestClient`.

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::quote;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{Attribute, Expr, ExprLit, ItemFn, Lit, LitStr, Meta, ReturnType, Signature, Token, Type};

/// Turns a documented `async fn(Context, Args) -> Result<Output, ToolError>`
/// into a tool that `Module::tool` registers.
///
/// Options: `name = "..."`, `permission = "guest" | "user" | "admin" | "owner"`,
/// `read_only`, `destructive`, `idempotent`, `open_world`,
/// `requires_approval`, `timeout_seconds = N`.
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    let function = syn::parse_macro_input!(item as ItemFn);
    match expand(attr.into(), function) {
        Ok(tokens) => tokens.into(),
        Err(error) => error.to_compile_error().into(),
    }
}

/// The attribute's options, parsed.
#[derive(Default)]
struct Options {
    name: Option<LitStr>,
    builder_calls: Vec<TokenStream2>,
}

fn parse_options(attr: TokenStream2) -> syn::Result<Options> {
    let mut options = Options::default();
    let metas = Punctuated::<Meta, Token![,]>::parse_terminated.parse2(attr)?;
    for meta in metas {
        let key = meta.path().get_ident().map(ToString::to_string).unwrap_or_default();
        let call = match (&meta, key.as_str()) {
            (
                Meta::Path(_),
                flag @ ("read_only" | "destructive" | "idempotent" | "open_world" | "requires_approval"),
            ) => {
                let method = syn::Ident::new(flag, Span::call_site());
                quote!(.#method())
            }
            (Meta::NameValue(nv), "name") => {
                options.name = Some(string_literal(&nv.value)?);
                continue;
            }
            (Meta::NameValue(nv), "permission") => {
                let level = string_literal(&nv.value)?;
                let variant = match level.value().as_str() {
                    "guest" => quote!(Guest),
                    "user" => quote!(User),
                    "admin" => quote!(Admin),
                    "owner" => quote!(Owner),
                    _ => {
                        return Err(syn::Error::new_spanned(
                            level,
                            "permission must be one of \"guest\", \"user\", \"admin\", \"owner\"",
                        ));
                    }
                };
                quote!(.permission(::module_sdk::Permission::#variant))
            }
            (Meta::NameValue(nv), "timeout_seconds") => {
                let seconds = match &nv.value {
                    Expr::Lit(ExprLit { lit: Lit::Int(int), .. }) => int.base10_parse::<f64>()?,
                    Expr::Lit(ExprLit { lit: Lit::Float(float), .. }) => float.base10_parse::<f64>()?,
                    other => {
                        return Err(syn::Error::new_spanned(other, "timeout_seconds takes a number, e.g. 30 or 2.5"));
                    }
                };
                if !(seconds > 0.0 && seconds.is_finite()) {
                    return Err(syn::Error::new_spanned(&nv.value, "timeout_seconds must be positive"));
                }
                // module_sdk::MAX_TIMEOUT, which this crate cannot name.
                if seconds > 86_400.0 {
                    return Err(syn::Error::new_spanned(&nv.value, "timeout_seconds must be at most 86400 (one day)"));
                }
                quote!(.timeout(::std::time::Duration::from_secs_f64(#seconds)))
            }
            _ => {
                return Err(syn::Error::new_spanned(
                    meta,
                    "unknown #[tool] option; expected name = \"...\", permission = \"...\", read_only, destructive, idempotent, open_world, requires_approval or timeout_seconds = N",
                ));
            }
        };
        options.builder_calls.push(call);
    }
    Ok(options)
}

fn string_literal(expr: &Expr) -> syn::Result<LitStr> {
    match expr {
        Expr::Lit(ExprLit { lit: Lit::Str(s), .. }) => Ok(s.clone()),
        other => Err(syn::Error::new_spanned(other, "expected a string literal")),
    }
}

/// The doc comment's text: lines joined, the one leading space rustdoc adds removed.
fn doc_text(attrs: &[Attribute]) -> String {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            Meta::NameValue(nv) => string_literal(&nv.value).ok().map(|s| s.value()),
            _ => None,
        })
        .map(|line| line.strip_prefix(' ').unwrap_or(&line).trim_end().to_owned())
        .collect();
    lines.join("\n").trim().to_owned()
}

/// The shape every tool has: two arguments, the `Context` and the argument
/// type, and a `Result`; anything else is refused where it is written, with
/// the shape to write instead.
fn check_signature(sig: &Signature) -> syn::Result<()> {
    const SHAPE: &str = "async fn name(ctx: Context, args: YourArgs) -> Result<YourOutput, ToolError>";
    if sig.inputs.len() != 2 {
        let found = sig.inputs.len();
        let message = format!(
            "a tool takes exactly two arguments, the context and its argument type; found {found}: write `{SHAPE}`"
        );
        return Err(match found {
            0 => syn::Error::new(sig.paren_token.span.join(), message),
            _ => syn::Error::new_spanned(&sig.inputs, message),
        });
    }
    if let Some(receiver) = sig.receiver() {
        return Err(syn::Error::new_spanned(
            receiver,
            format!("a tool is a free function, not a method: write `{SHAPE}`"),
        ));
    }
    let returns_result = match &sig.output {
        ReturnType::Type(_, ty) => match ty.as_ref() {
            Type::Path(path) => {
                path.path.segments.last().is_some_and(|last| last.ident.to_string().ends_with("Result"))
            }
            _ => false,
        },
        ReturnType::Default => false,
    };
    if !returns_result {
        let message = format!("a tool returns a `Result` whose error is `ToolError`: write `{SHAPE}`");
        return Err(match &sig.output {
            ReturnType::Type(_, ty) => syn::Error::new_spanned(ty, message),
            ReturnType::Default => syn::Error::new_spanned(&sig.ident, message),
        });
    }
    Ok(())
}

fn expand(attr: TokenStream2, function: ItemFn) -> syn::Result<TokenStream2> {
    let options = parse_options(attr)?;
    let ident = &function.sig.ident;
    if function.sig.asyncness.is_none() {
        return Err(syn::Error::new_spanned(function.sig.fn_token, "#[tool] needs an `async fn`"));
    }
    if !function.sig.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(&function.sig.generics, "#[tool] functions cannot be generic"));
    }
    check_signature(&function.sig)?;
    let description = doc_text(&function.attrs);
    if description.is_empty() {
        return Err(syn::Error::new_spanned(
            ident,
            format!(
                "tool `{ident}` has no description: add a doc comment (`/// What it does.`) above the function; models choose tools by it"
            ),
        ));
    }
    let name = options.name.map_or_else(|| ident.to_string(), |n| n.value());
    let builder_calls = &options.builder_calls;
    let vis = &function.vis;
    let docs: Vec<&Attribute> = function.attrs.iter().filter(|a| a.path().is_ident("doc")).collect();
    let mut handler = function.clone();
    handler.attrs.retain(|a| !a.path().is_ident("doc"));
    handler.vis = syn::Visibility::Inherited;
    Ok(quote! {
        #(#docs)*
        #vis fn #ident() -> ::module_sdk::Tool {
            #handler
            ::module_sdk::Tool::new(#name, #description, #ident) #(#builder_calls)*
        }
    })
}
