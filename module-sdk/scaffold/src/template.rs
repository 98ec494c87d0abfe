//! The files a new module starts with, kept as templates under
//! `templates/` and filled in by placeholder substitution.

/// One generated file: where it goes inside `modules/<name>/` and its template.
#[derive(Debug, Clone, Copy)]
pub struct Template {
    /// The path relative to the module directory.
    pub path: &'static str,
    /// The text, with `{{placeholder}}`s.
    pub text: &'static str,
}

/// Every file of a new module.
pub const TEMPLATES: &[Template] = &[
    Template { path: "Cargo.toml", text: include_str!("../templates/Cargo.toml.tmpl") },
    Template { path: "src/main.rs", text: include_str!("../templates/main.rs.tmpl") },
    Template { path: "README.md", text: include_str!("../templates/README.md.tmpl") },
    Template { path: "Containerfile", text: include_str!("../templates/Containerfile.tmpl") },
    Template { path: "kubernetes/kustomization.yaml", text: include_str!("../templates/kustomization.yaml.tmpl") },
];

/// The values substituted into the templates.
#[derive(Debug, Clone)]
pub struct Vars<'a> {
    /// The module's name (`weather`): crate, binary and tool prefix.
    pub name: &'a str,
    /// One line describing the module for a person and a model.
    pub description: &'a str,
}

/// Fills in `{{name}}`, `{{dns_name}}` (the name as a Kubernetes object
/// name: `_` becomes `-`), `{{description}}` and `{{description_escaped}}`
/// (the description escaped for a Rust or TOML `"..."` string).
pub fn render(template: &str, vars: &Vars<'_>) -> String {
    let escaped = vars.description.replace('\\', "\\\\").replace('"', "\\\"");
    template
        .replace("{{name}}", vars.name)
        .replace("{{dns_name}}", &vars.name.replace('_', "-"))
        .replace("{{description_escaped}}", &escaped)
        .replace("{{description}}", vars.description)
}

#[cfg(test)]
mod tests {
    use super::*;

    const VARS: Vars<'static> = Vars { name: "weather", description: r#"Forecasts, "live" \ cached."# };

    #[test]
    fn every_placeholder_is_filled() {
        for template in TEMPLATES {
            let text = render(template.text, &VARS);
            assert!(!text.contains("{{"), "{} keeps a placeholder:\n{text}", template.path);
            assert!(text.contains("weather"), "{} never names the module", template.path);
        }
    }

    #[test]
    fn kubernetes_names_use_dashes() {
        let vars = Vars { name: "web_search", description: "d" };
        let overlay = render(TEMPLATES[4].text, &vars);
        assert!(overlay.contains("namePrefix: web-search-\n"), "{overlay}");
        assert!(overlay.contains("newName: tool-modules/web_search\n"), "{overlay}");
    }

    #[test]
    fn the_description_is_escaped_inside_string_literals() {
        let manifest = render(TEMPLATES[0].text, &VARS);
        let parsed: toml_edit::DocumentMut = manifest.parse().expect("the manifest template renders to valid TOML");
        assert_eq!(parsed["package"]["description"].as_str(), Some(VARS.description));
        assert_eq!(parsed["package"]["name"].as_str(), Some("weather"));
        let main = render(TEMPLATES[1].text, &VARS);
        assert!(main.contains(r#"Module::new("weather", "Forecasts, \"live\" \\ cached.")"#), "{main}");
    }
}
